// The DuckDB peer for bench/peers.py: read every JSON record under IN and
// write them partitioned by event type, tenant and day under OUT, with
// DuckDB's own JSON writer (which re-encodes each record).
//
//   node copy.mjs IN OUT [threads]
import { DuckDBInstance } from '@duckdb/node-api';

const [inDir, outDir, threads = '2'] = process.argv.slice(2);
if (!inDir || !outDir) {
  console.error('usage: node copy.mjs IN OUT [threads]');
  process.exit(2);
}
const instance = await DuckDBInstance.create(':memory:', { threads });
const con = await instance.connect();
const q = (s) => s.replace(/'/g, "''");
// DuckDB 1.5 cannot PARTITION_BY with FORMAT JSON (duckdb#14927; merged
// upstream after 1.5.6). Its JSON writer is to_json() through the CSV
// writer, so this does the same by hand: one to_json() column, written
// unquoted, partitioned by the three keys.
await con.run(`
  COPY (
    SELECT to_json(r) AS line,
           r.event_type AS p_type,
           coalesce(r.detail.tenant_id, r.truck.tenant_id) AS p_tenant,
           CAST(CASE
             WHEN try_cast(ts AS BIGINT) IS NULL THEN CAST(ts AS TIMESTAMPTZ)
             WHEN length(ts) > 11 THEN to_timestamp(CAST(ts AS BIGINT) / 1000)
             ELSE to_timestamp(CAST(ts AS BIGINT))
           END AS DATE) AS p_day
    FROM (SELECT r, CAST(r."timestamp" AS JSON) ->> '$' AS ts
          FROM read_json_auto('${q(inDir)}/**', format = 'newline_delimited',
                              union_by_name = true) r)
  ) TO '${q(outDir)}' (FORMAT CSV, HEADER false, QUOTE '', ESCAPE '',
                       DELIMITER '\x1f',
                       PARTITION_BY (p_type, p_tenant, p_day));
`);
con.closeSync();
instance.closeSync();
