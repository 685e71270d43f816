// The official TypeScript MCP SDK client, driven by crucible's tests: one scenario per run.
//
//   node client.mjs SCENARIO URL TOKEN [JSON_OPTIONS]
//
// Prints one JSON object per line: {"event": ...} while it runs (the test may act on them),
// then {"result": ...} last. Exit 0 unless the script itself broke.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [scenario, url, token, rawOptions] = process.argv.slice(2);
const options = JSON.parse(rawOptions || "{}");
const emit = (object) => process.stdout.write(JSON.stringify(object) + "\n");
const text = (result) => (result.content || []).map((block) => block.text || "").join("");

async function connect({ scheme = "Bearer", origin } = {}) {
  const headers = { Authorization: `${scheme} ${token}` };
  if (origin !== undefined) headers.Origin = origin;
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: "crucible-ts-test", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

async function bash(client, command, callOptions = {}) {
  const result = await client.callTool({ name: "bash", arguments: { command, timeout: 600 } }, undefined, callOptions);
  return { text: text(result), isError: Boolean(result.isError) };
}

// Polls the workspace through the bash tool until `command` exits 0 (or `seconds` pass).
async function until(client, command, seconds = 60) {
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline) {
    if (!(await bash(client, command)).isError) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

// `ps` may be missing in a task image: a process is found by its whole command line in /proc
// (the pattern, "sleep N" with its dot bracketed, matches no poll's own command line).
const running = (marker) => "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f 2>/dev/null; echo; done"
  + ` | grep -q '^${marker.replace(".", "[.]")} $'`;

const scenarios = {
  // Read the task, fix it through the run's tools, run the tests, finish.
  async solve() {
    const client = await connect();
    const tools = (await client.listTools()).tools.map((tool) => tool.name);
    const view = await client.callTool({ name: "str_replace_based_edit_tool",
      arguments: { command: "view", path: "stockroom/report.py" } });
    const edit = await client.callTool({ name: "str_replace_based_edit_tool", arguments: {
      command: "str_replace", path: "stockroom/report.py",
      old_str: "return max(1, total // per_page)", new_str: "return max(1, -(-total // per_page))" } });
    const tests = await bash(client, "python3 -m pytest -q -p no:cacheprovider 2>&1 | tail -n 3");
    const finish = options.finish === false ? null
      : await client.callTool({ name: "finish", arguments: { summary: "page_count rounds up" } });
    await client.close();
    return { tools, viewed: text(view).includes("def page_count"), edited: !edit.isError, tests,
             finish: finish && text(finish) };
  },

  // Connect (and list the tools) with the given Origin header or authorization scheme.
  async connect() {
    try {
      const client = await connect(options);
      const tools = (await client.listTools()).tools.map((tool) => tool.name);
      await client.close();
      return { ok: true, tools };
    } catch (error) {
      return { ok: false, error: String(error), code: error.code ?? null };
    }
  },

  // A call longer than the client's timeout, with or without resetting it on progress.
  async progress() {
    const client = await connect();
    let progress = 0;
    const began = Date.now();
    try {
      const result = await bash(client, `sleep ${options.seconds}; echo slept`, {
        timeout: options.timeoutMs, resetTimeoutOnProgress: options.reset,
        onprogress: () => { progress += 1; } });
      return { ok: true, ...result, progress, ms: Date.now() - began };
    } catch (error) {
      return { ok: false, error: String(error), code: error.code ?? null, progress, ms: Date.now() - began };
    } finally {
      await client.close();
    }
  },

  // Start a long command, cancel the call once it runs, then watch the process go.
  async cancel() {
    const client = await connect();
    const marker = `sleep ${options.marker}`;
    const abort = new AbortController();
    const call = bash(client, marker, { signal: abort.signal }).then(
      (result) => ({ settled: "answered", ...result }), (error) => ({ settled: "rejected", error: String(error) }));
    const started = await until(client, running(marker));
    abort.abort("the test cancels it");
    const outcome = await call;
    const gone = await until(client, `! ${running(marker)}`, 30);
    await client.close();
    return { started, outcome, gone };
  },

  // Start a long command and report when it runs; then report how the call ended, and when.
  async inflight() {
    const client = await connect();
    const marker = `sleep ${options.marker}`;
    const call = bash(client, marker).then(
      (result) => ({ settled: "answered", ...result, at: Date.now() / 1000 }),
      (error) => ({ settled: "rejected", error: String(error), at: Date.now() / 1000 }));
    emit({ event: "running", ok: await until(client, running(marker)) });
    const outcome = await call;
    try { await client.close(); } catch (error) { /* the server is gone */ }
    return outcome;
  },
};

try {
  emit({ result: await scenarios[scenario]() });
  process.exit(0);
} catch (error) {
  emit({ error: String(error && error.stack || error) });
  process.exit(1);
}
