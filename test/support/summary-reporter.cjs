// Prints the plain closing line "N passed, N failed" that CI reads, after jest's own summary.
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const skipped = results.numPendingTests + results.numTodoTests;
    process.stdout.write(
      `\nTests: ${results.numPassedTests} passed, ${results.numFailedTests} failed` +
        (skipped ? `, ${skipped} skipped` : '') + '\n',
    );
  }
}
module.exports = SummaryReporter;
