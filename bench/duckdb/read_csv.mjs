// DuckDB reads CSV files back for the tests (tests/integration): each file
// with a header row, every column as text, printed as one JSON array of
// rows per file (a row maps column name to text, or null for an empty
// cell).
//
//   node read_csv.mjs FILE...
import { DuckDBInstance } from '@duckdb/node-api';

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error('usage: node read_csv.mjs FILE...');
  process.exit(2);
}
const instance = await DuckDBInstance.create(':memory:', { threads: '1' });
const con = await instance.connect();
const q = (s) => s.replace(/'/g, "''");
const out = {};
for (const f of files) {
  const reader = await con.runAndReadAll(
    `SELECT * FROM read_csv('${q(f)}', header = true, all_varchar = true,
                            delim = ',', quote = '"', escape = '"',
                            strict_mode = true, hive_partitioning = false)`);
  out[f] = reader.getRowObjectsJson();
}
console.log(JSON.stringify(out));
con.closeSync();
instance.closeSync();
