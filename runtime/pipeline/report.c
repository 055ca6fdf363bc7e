/* What a run says while it works: the progress line on a terminal, the
 * minute report in the log, and `skipprd status` (read from the state
 * without its lock).
 *
 * Owns: e->report (pl_report): when it last said what.
 * Thread: the pipeline thread; sk_pipeline_status() runs alone.
 */
#include "pipeline/report.h"

#include "pipeline/engine.h"
#include "pipeline/shard.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* When the minute report was last made and the counters then; when the
 * progress line was last drawn. */
struct pl_report {
    uint64_t ns, units, records, objects;
    uint64_t progress_ns;
};

pl_report *pl_report_new(uint64_t now)
{
    pl_report *r = sk_calloc(1, sizeof *r);
    if (r)
        r->ns = now;
    return r;
}

void pl_report_free(pl_report *r)
{
    sk_free(r);
}

/* Once a minute, at info level: what the last minute copied, and memory
 * as malloc and the kernel see it. A long run's log so shows its pace, and
 * whether live memory stays level (heap in use) apart from what the
 * process keeps resident. */
static void minute_report(engine *e, uint64_t now)
{
    if (now - e->report->ns < REPORT_NS)
        return;
    e->report->ns = now;
    sk_memstats m;
    sk_memory_stats(&m);
    sk_info("last minute: %" PRIu64 " units, %" PRIu64 " records, %" PRIu64
            " objects written; memory: heap in use %.1f MiB, malloc holds "
            "%.1f MiB, resident %.1f MiB",
            e->tally.units - e->report->units, e->tally.records - e->report->records,
            e->tally.objects - e->report->objects, (double)m.heap_used / 1048576.0,
            (double)m.heap_held / 1048576.0, (double)m.rss / 1048576.0);
    e->report->units = e->tally.units;
    e->report->records = e->tally.records;
    e->report->objects = e->tally.objects;
}

void pl_progress(engine *e, int force)
{
    uint64_t now = sk_now_ns();
    minute_report(e, now);
    pl_metrics_update(e, force);
    if (!e->progress)
        return;
    if (!force && now - e->report->progress_ns < 250000000ULL)
        return;
    e->report->progress_ns = now;
    double secs = (double)(now - e->start_ns) / 1e9;
    double mbs = secs > 0 ? (double)e->tally.bytes_in / 1e6 / secs : 0;
    uint64_t buffered = 0;
    for (size_t i = 0; i < sk_state_nlive(e->st); i++)
        buffered += sk_slice_bytes(sk_state_slice_at(e->st, i));
    fprintf(stderr, "\r\033[Kunits %" PRIu64 " | records %" PRIu64
            " | dead %" PRIu64 " | %.1f MB/s | buffered %.1f MB | "
            "objects %" PRIu64, e->tally.units, e->tally.records, e->tally.dead, mbs,
            (double)buffered / 1e6, e->tally.objects);
    fflush(stderr);
    sk_log_progress_active = 1;
}

int sk_pipeline_status(const sk_pipeline_cfg *cfg)
{
    sk_state *st = NULL;
    char name[512];
    int rc = sk_state_open(cfg->state_dir, cfg->workspace,
                           sk_pipeline_state_name(cfg, name, sizeof name), 1,
                           NULL, &st);
    if (rc == SKIPPR_NOENT) {
        printf("pipeline %s: never run (no state in %s/%s/%s)\n", cfg->name,
               cfg->state_dir, cfg->workspace, name);
        return SKIPPR_OK;
    }
    if (rc)
        return rc;
    char pid[32];
    int running = sk_state_in_use(sk_state_dir(st), pid, sizeof pid);
    uint64_t done = 0, partial = 0;
    size_t it = 0;
    sk_unit_rec *u;
    while ((u = sk_ledger_recent_next(sk_state_ledger(st), &it)))
        (sk_unit_flags(u) & SK_UNIT_DONE) ? done++ : partial++;
    uint64_t open_n = 0, open_rec = 0, open_bytes = 0, sealed = 0;
    for (size_t i = 0; i < sk_state_nlive(st); i++) {
        sk_slice *s = sk_state_slice_at(st, i);
        if (sk_slice_state_of(s) == SK_SLICE_OPEN) {
            open_n++;
            open_rec += sk_slice_records(s);
            open_bytes += sk_slice_bytes(s);
        } else {
            sealed++;
        }
    }
    printf("pipeline:        %s\n", cfg->name);
    printf("state:           %s (id %s)\n", sk_state_dir(st), sk_state_id(st));
    printf("running:         %s%s%s\n", running ? "yes, pid " : "no",
           running ? pid : "", "");
    printf("units done:      %" PRIu64 " (compacted ledger) + %" PRIu64
           " recent\n", sk_ledger_file_done(sk_state_ledger(st)), done);
    printf("units partial:   %" PRIu64 "\n", partial);
    printf("slices open:     %" PRIu64 " (%" PRIu64 " records, %" PRIu64
           " bytes buffered)\n", open_n, open_rec, open_bytes);
    printf("slices pending:  %" PRIu64 " sealed, awaiting the sink\n", sealed);
    printf("wal:             %" PRIu64 " bytes\n",
           sk_state_wal(st) ? sk_wal_disk_bytes(sk_state_wal(st)) : 0);
    sk_state_close(st);
    return SKIPPR_OK;
}
