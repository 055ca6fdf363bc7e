// DuckDB reads skippr's JSON output back for the tests (test_jsonl.py):
// every object of one namespace folder, with the hive partition columns
// of its path, counted per partition. Each record must parse as JSON in
// the given format, or the read fails and so does this script.
//
//   node count_json.mjs FOLDER FORMAT EXT
//     FORMAT: newline_delimited (JSON Lines) or unstructured (JSON values
//     one after another, as a .json object holds them)
// Prints {"files": N, "rows": [{"p_year": "2021", ..., "n": "12"}, ...]}.
import { DuckDBInstance } from '@duckdb/node-api';

const [folder, format, ext] = process.argv.slice(2);
if (!ext) {
  console.error('usage: node count_json.mjs FOLDER FORMAT EXT');
  process.exit(2);
}
const instance = await DuckDBInstance.create(':memory:', { threads: '1' });
const con = await instance.connect();
const q = (s) => s.replace(/'/g, "''");
const src = `read_json_objects('${q(folder)}/**/*.${ext}', format = '${format}',
                               hive_partitioning = true, filename = true)`;
const files = await con.runAndReadAll(
  `SELECT count(DISTINCT filename) AS files FROM ${src}`);
const rows = await con.runAndReadAll(
  `SELECT * EXCLUDE (json, filename), count(*) AS n FROM ${src} GROUP BY ALL`);
console.log(JSON.stringify({ files: Number(files.getRowObjectsJson()[0].files),
                             rows: rows.getRowObjectsJson() }));
con.closeSync();
instance.closeSync();
