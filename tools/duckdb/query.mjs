// Runs SQL in DuckDB (the @duckdb/node-api version pinned in package-lock.json)
// and prints the rows of its last statement as JSON lines, one object per row
// keyed by column name.
//
//   node tools/duckdb/query.mjs "<SQL>"     (or "-" to read the SQL from stdin)
//
// The SQL may hold several statements separated by semicolons; each runs in
// order on one connection of an in-memory database, and only the last one's
// rows are printed (streamed, so large results are not held in memory).
// DuckDB runs with 2 threads unless the SQL sets otherwise (SET threads = N).
// Values are converted by DuckDB's JSON conversion (getRowObjectsJson): BIGINT
// and HUGEINT as strings, DOUBLE and FLOAT as numbers (NaN and infinities as
// strings), lists as arrays, STRUCT and MAP as objects, DATE and TIMESTAMP as
// their text.
//
// With DUCKDB_OUTPUT=count it prints, instead of the last statement's rows,
// one line {"rows": N}: every result chunk is fetched from DuckDB (the query
// runs to its end and hands over all its vectors) but no value is converted
// to JavaScript (scripts/bench.sh's anchor of a full read: DuckDB's own work).
//
// With DUCKDB_TIMING=1 in the environment it also writes, per statement, a
// line "duckdb: statement I of N: S s, cpu C s" to stderr: the statement's
// time from prepare to its last row printed, without node's and DuckDB's
// start, and the CPU time (user + system, every thread) the process used
// meanwhile (scripts/bench.sh times its materialization with it).
//
// Exit status: 0 after printing every row; 1 when the SQL fails (the error is
// on stderr, naming the statement's position); 2 on a usage error.
// Install first: npm ci --prefix tools/duckdb (scripts/test.sh does it).
import { readFileSync } from "node:fs";
import { DuckDBInstance } from "@duckdb/node-api";

const timing = process.env.DUCKDB_TIMING === "1";
const countOnly = process.env.DUCKDB_OUTPUT === "count";
const usage = 'usage: node tools/duckdb/query.mjs "<SQL>"   (or - to read the SQL from stdin)';

async function main(argv) {
  if (argv.length !== 1 || argv[0] === "" || argv[0] === "-h" || argv[0] === "--help") {
    process.stderr.write(usage + "\n");
    return 2;
  }
  const sql = argv[0] === "-" ? readFileSync(0, "utf8") : argv[0];
  const instance = await DuckDBInstance.create(":memory:", { threads: "2" });
  const connection = await instance.connect();
  try {
    const statements = await connection.extractStatements(sql);
    const last = statements.count - 1;
    for (let i = 0; i <= last; i++) {
      let prepared;
      const t0 = process.hrtime.bigint();
      const cpu0 = process.cpuUsage();
      try {
        prepared = await statements.prepare(i);
        if (i < last) {
          await prepared.run();
          continue;
        }
        const result = await prepared.stream();
        if (countOnly) {
          let rows = 0;
          for (let chunk = await result.fetchChunk(); chunk !== null && chunk.rowCount > 0; chunk = await result.fetchChunk()) {
            rows += chunk.rowCount;
          }
          process.stdout.write(JSON.stringify({ rows }) + "\n");
          continue;
        }
        for await (const rows of result.yieldRowObjectJson()) {
          let out = "";
          for (const row of rows) out += JSON.stringify(row) + "\n";
          if (out !== "" && !process.stdout.write(out)) {
            await new Promise((resolve) => process.stdout.once("drain", resolve));
          }
        }
      } catch (err) {
        throw new Error(`statement ${i + 1} of ${statements.count}: ${err.message}`);
      } finally {
        prepared?.destroySync();
        if (timing) {
          const s = Number(process.hrtime.bigint() - t0) / 1e9;
          const cpu = process.cpuUsage(cpu0);
          const cs = (cpu.user + cpu.system) / 1e6;
          process.stderr.write(`duckdb: statement ${i + 1} of ${statements.count}: ${s.toFixed(3)} s, cpu ${cs.toFixed(3)} s\n`);
        }
      }
    }
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`duckdb: ${err.message}\n`);
    process.exitCode = 1;
  },
);
