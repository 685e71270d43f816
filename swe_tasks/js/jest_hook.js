// crucible-strict's hook in run_script.sh's node processes (swe_tasks/jestjson.py), loaded by
// NODE_OPTIONS=--require from a root-owned copy. swe_tasks/jestjson.py's hook_program puts
// `const REPORTS = "<results>/r";` above this text. In jest's CLI process only (argv[1] is jest's
// bin; yarn and jest's workers load it too and are left alone) it asks jest for its results:
// `--json --outputFile=REPORTS/jest-<pid>-<ms>.json`, or where the run passes --json or
// --outputFile itself (its parser reads jest's JSON from stdout) this very file as
// --testResultsProcessor, which writes the results to such a file and hands them back
// unchanged. A run that names its own processor gets nothing added: no results, fail-closed.
const fs = require('fs');
const path = require('path');

const LOADED = Symbol.for('crucible.jest-hook');
const JEST_BIN = /(^|[/\\])jest(-cli)?[/\\]bin[/\\]jest(\.js)?$/;

function reportPath() {
  return path.join(REPORTS, `jest-${process.pid}-${Date.now()}.json`);
}

function askForResults() {
  let script = '';
  try {
    script = fs.realpathSync(process.argv[1] || '');
  } catch (e) {
    return;
  }
  if (!JEST_BIN.test(script)) return;
  const args = process.argv.slice(2);
  const end = args.indexOf('--');
  const options = end < 0 ? args : args.slice(0, end);
  const has = (flag) => options.some((a) => a === flag || a.startsWith(`${flag}=`));
  let added = [];
  if (!has('--json') && !has('--outputFile')) added = ['--json', `--outputFile=${reportPath()}`];
  else if (!has('--testResultsProcessor')) added = [`--testResultsProcessor=${__filename}`];
  process.argv.splice(end < 0 ? process.argv.length : 2 + end, 0, ...added);
}

if (!global[LOADED]) {
  global[LOADED] = true;
  askForResults();
}

// As --testResultsProcessor: the aggregated results, in --json's shape (file name, its tests).
module.exports = function writeResults(results) {
  const testResults = (results.testResults || []).map((file) => ({
    name: file.testFilePath,
    status: file.testExecError || file.numFailingTests > 0 ? 'failed' : 'passed',
    assertionResults: (file.testResults || []).map((test) => ({
      ancestorTitles: test.ancestorTitles, title: test.title, fullName: test.fullName, status: test.status,
    })),
  }));
  fs.writeFileSync(reportPath(), JSON.stringify({ success: results.success, testResults }));
  return results;
};
