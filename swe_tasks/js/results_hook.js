// crucible-strict's hook in run_script.sh's node processes (swe_tasks/jsresults.py), loaded by
// NODE_OPTIONS=--require from a root-owned copy. swe_tasks/jsresults.py's hook_program puts
// `const REPORTS = "<results>/r";` above this text. It acts in a test runner's CLI process only
// (argv[1] is jest's or mocha's bin; yarn, npm and jest's workers load it and are left alone):
// - jest: asks for its results, `--json --outputFile=REPORTS/js-jest-<pid>-<ms>.json`, or where
//   the run passes --json or --outputFile itself (its parser reads jest's JSON from stdout) this
//   very file as --testResultsProcessor, which writes the results to such a file and hands them
//   back unchanged. A run that names its own processor gets nothing added: no results, fail-closed.
// - mocha: listens to its runner's pass/fail/pending events and writes them when the run ends
//   (REPORTS/js-mocha-<pid>-<ms>.json); the run's own reporter is left as it is.
// In every node process (jest's workers too): a write that would leave a `.snap` file as it is
// is skipped (skipUnchangedSnapshotWrites).
const fs = require('fs');
const path = require('path');

const LOADED = Symbol.for('crucible.results-hook');
const JEST_BIN = /(^|[/\\])jest(-cli)?[/\\]bin[/\\]jest(\.js)?$/;
const MOCHA_BIN = /(^|[/\\])mocha[/\\](bin[/\\](mocha|_mocha)(\.js)?|lib[/\\]cli[/\\]cli\.js)$/;

function reportPath(runner) {
  return path.join(REPORTS, `js-${runner}-${process.pid}-${Date.now()}.json`);
}

function askJest() {
  const args = process.argv.slice(2);
  const end = args.indexOf('--');
  const options = end < 0 ? args : args.slice(0, end);
  // jest's CLI (yargs) takes each flag camelCased or kebab-cased; a second value makes an array it refuses.
  const has = (...flags) => options.some((a) => flags.some((flag) => a === flag || a.startsWith(`${flag}=`)));
  let added = [];
  if (!has('--json') && !has('--outputFile', '--output-file')) added = ['--json', `--outputFile=${reportPath('jest')}`];
  else if (!has('--testResultsProcessor', '--test-results-processor')) added = [`--testResultsProcessor=${__filename}`];
  process.argv.splice(end < 0 ? process.argv.length : 2 + end, 0, ...added);
}

function listenToMocha(root) {
  // The Runner mocha's CLI will load (the same file, so the same class).
  const Runner = require(path.join(root, 'lib', 'runner.js'));
  const run = Runner.prototype.run;
  Runner.prototype.run = function runAndRecord(...args) {
    const tests = [];
    const add = (status) => (test) => {
      tests.push({ file: test.file, titlePath: test.titlePath(), type: test.type, status });
    };
    this.on('pass', add('passed')).on('fail', add('failed')).on('pending', add('pending'));
    this.once('end', () => fs.writeFileSync(reportPath('mocha'), JSON.stringify({ runner: 'mocha', tests })));
    return run.apply(this, args);
  };
}

// jest saves a test file's snapshot file whenever it holds an obsolete entry, in CI mode too,
// even when what it writes is what the file already holds; under crucible-strict a hidden
// snapshot file is root's and read-only, so that needless write would fail the whole test file
// (EACCES) where the official run, as root, passes. A write that would leave a `.snap` file byte
// for byte as it is is skipped; any other write goes through, and fails on a locked file, as it
// should. Installed before jest loads graceful-fs, which copies fs's functions when first loaded.
function skipUnchangedSnapshotWrites() {
  const write = fs.writeFileSync;
  fs.writeFileSync = function writeFileSync(file, data, options) {
    if (typeof file === 'string' && file.endsWith('.snap') && (typeof data === 'string' || Buffer.isBuffer(data))) {
      try {
        const encoding = typeof options === 'string' ? options : (options && options.encoding) || 'utf8';
        if (fs.readFileSync(file).equals(Buffer.isBuffer(data) ? data : Buffer.from(data, encoding))) return undefined;
      } catch (e) {
        // absent or unreadable: written as asked
      }
    }
    return write.apply(this, arguments);
  };
}

if (!global[LOADED]) {
  global[LOADED] = true;
  skipUnchangedSnapshotWrites();
  let script = '';
  try {
    script = fs.realpathSync(process.argv[1] || '');
  } catch (e) {
    script = '';
  }
  const mocha = MOCHA_BIN.exec(script);
  if (JEST_BIN.test(script)) askJest();
  else if (mocha) listenToMocha(script.slice(0, mocha.index + mocha[1].length + 'mocha'.length));
}

// As jest's --testResultsProcessor: the aggregated results, in --json's shape (file name, its tests).
module.exports = function writeResults(results) {
  const testResults = (results.testResults || []).map((file) => ({
    name: file.testFilePath,
    status: file.testExecError || file.numFailingTests > 0 ? 'failed' : 'passed',
    assertionResults: (file.testResults || []).map((test) => ({
      ancestorTitles: test.ancestorTitles, title: test.title, fullName: test.fullName, status: test.status,
    })),
  }));
  fs.writeFileSync(reportPath('jest'), JSON.stringify({ success: results.success, testResults }));
  return results;
};
