/* The engine's configuration keys: see options.h. The docs here are what
 * docs/CONFIG.md shows (scripts/gen_reference.py writes its tables). */
#include "config/options.h"

#include <string.h>

#include "config/settings.h"

#define CFG(field) offsetof(sk_pipeline_cfg, field)

/* in the order of sk_storage_mode */
static const char *const storage_modes[] = {"local", "s3", NULL};
static const char *const pipeline_types[] = {"copy", NULL};
/* validate: true parses records whole (route.skim 0), false skims (1) */
static const char *const validate_modes[] = {"true", "false", NULL};
/* in the order of sk_multiline */
static const char *const multiline_modes[] = {"json", "compact",
                                              "dead_letter", NULL};
/* a yes/no setting: its index is the value */
static const char *const bool_modes[] = {"false", "true", NULL};
/* in the order of sk_changed_units */
static const char *const changed_modes[] = {"skip", "copy", "fail", NULL};
static const char *const naming_modes[] = {"column", "per_path", NULL};
static const char *const time_units[] = {"year", "month", "day", "hour",
                                         NULL};

const sk_engine_option sk_engine_options[] = {
    {.name = "workspace",
     .section = SK_EOPT_SKIPPR,
     .type = SK_EOPT_STRING,
     .def = "default",
     .offset = CFG(workspace),
     .doc = "Name grouping pipelines' state."},
    {.name = "skipprd_el_storage_mode",
     .section = SK_EOPT_SKIPPR,
     .type = SK_EOPT_CHOICE,
     .def = "local",
     .choices = storage_modes,
     .offset = CFG(storage_mode),
     .doc = "Where state lives: `local` (the state folder only) or `s3` "
        "(the store `state_store` names holds it; the state folder is a "
        "working copy that may be lost with the box)."},
    {.name = "state_store",
     .section = SK_EOPT_SKIPPR,
     .type = SK_EOPT_REF,
     .def = NULL,
     .offset = SIZE_MAX,
     .doc = "With `skipprd_el_storage_mode: s3`: `data_sinks.NAME`, an S3 "
        "entry whose bucket and prefix hold each pipeline's state, under "
        "`{s3_prefix}/{workspace}/{pipeline}/`. `skipprd validate` checks "
        "that its plugin can hold state and takes its options."},
    {.name = "state_lease_seconds",
     .section = SK_EOPT_SKIPPR,
     .type = SK_EOPT_INT,
     .def = "30",
     .lo = 3,
     .hi = 3600,
     .offset = CFG(lease_seconds),
     .doc = "With `skipprd_el_storage_mode: s3`: how long the lease on a "
        "pipeline's state lasts without a renewal (renewed every third of "
        "it). A process that finds the lease held waits until it is "
        "renewed (then exits) or lapses (then takes over)."},
    {.name = "state_dir",
     .section = SK_EOPT_SKIPPR,
     .type = SK_EOPT_STRING,
     .def = ".skippr",
     .offset = SIZE_MAX,
     .doc = "Folder for state: `{state_dir}/{workspace}/{pipeline}/`. "
        "A relative one is read against the config file's folder (symlinks "
        "resolved), not the working directory, so the file finds its state "
        "wherever skipprd starts; by flags, against the working directory, "
        "and without `--state-dir` it is `$XDG_STATE_HOME/skippr` "
        "(`~/.local/state/skippr`)."},
    {.name = "plugin_dirs",
     .section = SK_EOPT_SKIPPR,
     .type = SK_EOPT_LIST,
     .def = NULL,
     .offset = SIZE_MAX,
     .doc = "Extra plugin folders, searched first: one folder, or a list of "
        "them. Absolute paths only."},
    {.name = "metrics_listen",
     .section = SK_EOPT_SKIPPR,
     .type = SK_EOPT_STRING,
     .def = NULL,
     .offset = CFG(metrics_listen),
     .doc = "`ADDRESS:PORT` (IPv4) to serve Prometheus metrics on, at "
        "`/metrics`, such as `127.0.0.1:9464`; `--metrics-listen` "
        "overrides. Off by default."},
    {.name = "threads",
     .section = SK_EOPT_SKIPPR,
     .type = SK_EOPT_INT,
     .def = "online CPUs",
     .lo = 1,
     .hi = 256,
     .offset = SIZE_MAX,
     .computed = 1,
     .doc = "Worker threads for framing and routing (1–256; `--threads` "
        "overrides)."},
    {.name = "type",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_CHOICE,
     .def = "copy",
     .choices = pipeline_types,
     .offset = SIZE_MAX,
     .doc = "Only `copy`. `ingest` and `cdc` are refused."},
    {.name = "data_source",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_REF,
     .def = NULL,
     .offset = SIZE_MAX,
     .doc = "`data_sources.NAME`"},
    {.name = "data_sink",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_REF,
     .def = NULL,
     .offset = SIZE_MAX,
     .doc = "`data_sinks.NAME`"},
    {.name = "transform",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_MAP,
     .def = NULL,
     .offset = SIZE_MAX,
     .doc = "The routing: see `transform:` below."},
    {.name = "buffer_threshold_seconds",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_INT,
     .def = "300",
     .hi = 7 * 86400,
     .offset = CFG(buffer_threshold_seconds),
     .flag = 1,
     .doc = "Longest a slice stays open before it is written (0 to 604800)."},
    {.name = "allowed_lateness_seconds",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_INT,
     .def = "3600",
     .hi = 30 * 86400,
     .offset = CFG(allowed_lateness_seconds),
     .flag = 1,
     .doc = "Event-time sealing: a slice whose time bucket ended this long "
        "before the earliest arrival time among units not yet done is "
        "written (0 to 2592000). The default covers Firehose's longest "
        "buffering (900 s) four times over. It is also how far out of "
        "listing order a unit's arrival time may be before event time "
        "turns off (docs/EXACTLY_ONCE.md)."},
    {.name = "arrival_key_pattern",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_STRING,
     .def = NULL,
     .offset = CFG(arrival_key_pattern),
     .flag = 1,
     .doc = "Event-time sealing: where a unit's key says when it arrived, "
        "e.g. `dt=%Y-%m-%d/` or `%Y%m%d-%H` (`%Y`, `%m`, `%d`, `%H`: 4, 2, "
        "2, 2 digits; `%%`: a percent sign; the last match in the key "
        "counts). Unset: Firehose `YYYY/MM/DD/HH/` prefixes and Hive "
        "`year=/month=/day=/hour=` folders are found by themselves."},
    {.name = "max_object_bytes",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_SIZE,
     .def = "1GiB",
     .lo = 1024,
     .hi = 5LL << 40,
     .offset = CFG(max_object_bytes),
     .flag = 1,
     .doc = "A slice reaching this size is written; larger partitions become "
        "several objects."},
    {.name = "wal_disk_budget",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_SIZE,
     .def = "8GiB",
     .lo = 1 << 20,
     .hi = INT64_MAX,
     .offset = CFG(wal_disk_budget),
     .flag = 1,
     .doc = "Local disk for the WAL. Slices growing in the sink hold no "
        "bytes in it (the File sink's data slices), or only the tails no "
        "part holds yet (S3), which go to staging pieces in the bucket "
        "when they do not fit in half of it. Above it, the largest slices "
        "the WAL holds (converted, XML, dead letters, other sinks) are "
        "written early. Segments rotate at a quarter of it."},
    {.name = "memory_budget",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_SIZE,
     .def = "256MiB",
     .lo = 1 << 20,
     .hi = INT64_MAX,
     .offset = CFG(memory_budget),
     .flag = 1,
     .doc = "Above this much in open blocks, blocks are spilled to the WAL "
        "(or, for slices growing in the sink, appended to their objects; "
        "S3: their whole parts uploaded, their tails committed and "
        "dropped from memory). With S3 as the sink, commits are spaced by "
        "half of it, so most bytes reach a part without touching the disk. "
        "Buffers that slices give back are kept for new slices within the "
        "same budget (open blocks and kept buffers together), since a fresh "
        "page costs a fault and zeroing; a continuous run lets them go "
        "while it waits for the next poll (a streaming source: every ten "
        "seconds). Plugins see it too (`host->memory_budget`): the "
        "S3 source fetches ahead within at most half of it."},
    {.name = "max_record_bytes",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_SIZE,
     .def = "16MiB",
     .lo = 1024,
     .hi = 1LL << 30,
     .offset = CFG(max_record_bytes),
     .flag = 1,
     .doc = "Larger records are dead-lettered."},
    {.name = "poll_interval_seconds",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_INT,
     .def = "10",
     .lo = 1,
     .hi = 86400,
     .offset = CFG(poll_interval_seconds),
     .flag = 1,
     .doc = "Continuous mode: time between listings."},
    {.name = "commit_interval_ms",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_INT,
     .def = "1000",
     .hi = 3600000,
     .offset = CFG(commit_interval_ms),
     .flag = 1,
     .doc = "Longest time between durable group commits, which wait for fsync "
        "(0: after every read window). In between, a commit every 16 MB of "
        "input is written without waiting for the disk: it survives a crash "
        "of the process, not a power loss. With slices growing in the sink "
        "every commit syncs the sink, and unless this is 0 commits also "
        "wait for 32 pages (128 KiB) of input per open slice."},
    {.name = "full_listing_interval_seconds",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_INT,
     .def = "3600",
     .lo = 0,
     .hi = 30 * 86400,
     .offset = CFG(full_listing_interval_seconds),
     .flag = 1,
     .doc = "Continuous mode: polls list only from the first unit whose "
        "arrival time is within allowed_lateness_seconds of the clock, or "
        "that is not done, onwards (date prefixes before it are finished); "
        "the whole prefix is listed again this often, so that a unit "
        "dropped into an old prefix is still found. 0: every poll lists "
        "everything."},
    {.name = "incremental_listing",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_CHOICE,
     .def = "false",
     .choices = bool_modes,
     .offset = CFG(incremental_listing),
     .flag = 1,
     .doc = "`--once` runs list as continuous polls do: from where the "
        "finished date prefixes end (the mark kept in the state folder), "
        "with a whole listing every full_listing_interval_seconds. By "
        "default a `--once` run lists everything."},
    {.name = "verify_done_units",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_CHOICE,
     .def = "true",
     .choices = bool_modes,
     .offset = CFG(verify_done_units),
     .flag = 1,
     .doc = "`true`: every listed unit that is already done has its version "
        "and size compared with the ledger's, and one changed since it was "
        "copied is reported (and skipped). `false`: a source that can list "
        "names alone (the File source) skips done units by name, without "
        "reading their metadata (a stat per file), so re-runs are about 3 "
        "times faster; a done file changed since is then skipped without a "
        "word. Units not done are always checked."},
    {.name = "list_batch",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_INT,
     .def = "4096",
     .lo = 1,
     .hi = 1 << 20,
     .offset = CFG(list_batch),
     .flag = 1,
     .doc = "Units listed per round: the engine lists this many, copies them, "
        "then lists on after the last. Bounds the memory a listing holds."},
    {.name = "upload_concurrency",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_INT,
     .def = "8",
     .lo = 1,
     .hi = 256,
     .offset = CFG(upload_concurrency),
     .flag = 1,
     .doc = "Sealed slices written at once, each by its own sink instance on "
        "its own thread. Memory for writing is about this many times the "
        "sink's buffer (the S3 sink's `part_size`)."},
    {.name = "wal_zstd_level",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_INT,
     .def = "0",
     .hi = 19,
     .offset = CFG(wal_zstd_level),
     .flag = 1,
     .doc = "Compress WAL blocks with zstd at this level (1–19); `0` writes "
        "them plain. Fewer bytes on disk for more CPU; blocks that do not "
        "shrink are written plain. Output objects are the same either way."},
    {.name = "validate",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_CHOICE,
     .def = "true",
     .choices = validate_modes,
     .offset = offsetof(sk_pipeline_cfg, route.skim),
     .flag = 1,
     .doc = "`true`: every JSON record is parsed whole, and an invalid one is "
        "dead-lettered. `false`: a record is parsed only as far as routing "
        "needs: once the first field of each routing list has been found, "
        "the rest of the record is skipped by a scan that only follows "
        "strings and brackets, and objects and arrays that no field path "
        "enters are skipped the same way. Skipped bytes are not checked, so "
        "an invalid record whose error lies there is copied as it is (byte "
        "for byte, never changed), and with a member name given twice the "
        "first counts. About 1.3 times faster peeking; routing is the same. "
        "A list of time fields, where a present time may not parse, is "
        "always read to the end of the record."},
    {.name = "retry_backoff_ms",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_INT,
     .def = "100",
     .hi = 60000,
     .offset = CFG(retry_backoff_ms),
     .flag = 1,
     .doc = "How long a sink's first retry of an object waits; each next one "
        "waits twice as long, up to 100 times it, with jitter (8 attempts "
        "in all)."},
    {.name = "max_inflate_ratio",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_INT,
     .def = "100",
     .hi = 1000000,
     .offset = CFG(max_inflate_ratio),
     .flag = 1,
     .doc = "A gzip or zstd object that decompresses to more than this many "
        "times its compressed size (counted after its first 64 MiB) stops "
        "the run with an error naming it, and is not copied: a "
        "decompression bomb. Event JSON compresses 5 to 20 times; `0` means "
        "no limit."},
    {.name = "multiline_records",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_CHOICE,
     .def = "json",
     .choices = multiline_modes,
     .offset = CFG(multiline),
     .flag = 1,
     .doc = "What a JSON record that spans lines (pretty-printed, as many "
        "Firehose archives hold) becomes when the sink writes `.jsonl` "
        "files, which JSON Lines readers (DuckDB's `newline_delimited`, "
        "Athena's JSON SerDe, `jq -c`) read one line per record. `json`: "
        "its exact bytes go to a `.json` object beside the partition's "
        "`.jsonl` one (concatenated JSON, each record followed by a "
        "newline), so every `.jsonl` object is valid JSON Lines and nothing "
        "changes a byte; the run's summary counts them. `compact`: the "
        "whitespace between its tokens (spaces, tabs, CR, LF outside "
        "strings) is removed and it joins the `.jsonl` object: the only "
        "setting that changes a record's bytes. `dead_letter`: it is "
        "dead-lettered. Sinks that take records (Kafka, MQTT, HTTP) and CSV "
        "or XML output are not concerned."},
    {.name = "allow_second_copy",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_CHOICE,
     .def = "false",
     .choices = bool_modes,
     .offset = CFG(allow_second_copy),
     .flag = 1,
     .doc = "A state claims the sink it writes (S3, File): a small "
        "`_skippr/claims/HASH.json` under the sink's prefix names its state "
        "id, per source and transform. A run whose state is not the one "
        "that claimed it (a lost state folder, another workspace, a new box "
        "with local state) stops before writing, naming the other state. "
        "`true` writes a second, whole copy beside the first instead (object "
        "names carry each state's id); the claim stays the first state's."},
    {.name = "changed_units",
     .section = SK_EOPT_PIPELINE,
     .type = SK_EOPT_CHOICE,
     .def = "skip",
     .choices = changed_modes,
     .offset = CFG(changed_units),
     .flag = 1,
     .doc = "What a unit (file, object) that changed since it was copied "
        "(another version or size than the ledger's) becomes. Each one is "
        "logged with both versions and counted in the summary and in "
        "`skippr_units_skipped_total{reason=\"changed\"}` or "
        "`skippr_units_recopied_total`. `skip`: not copied again, and the "
        "run exits with code 4 once its work is done, so a run that left "
        "data it was asked for uncopied is never a silent success. `copy`: "
        "its new version is copied whole, into new objects beside the "
        "old ones (records the two versions share are then in the sink "
        "twice); exit 0. `fail`: the run stops at the first one, exit 1. "
        "With `verify_done_units: false` done units are matched by name "
        "and never seen as changed."},
    {.name = "namespace_fields",
     .section = SK_EOPT_TRANSFORM,
     .type = SK_EOPT_STRING,
     .def = "event_type",
     .offset = CFG(route.namespace_fields),
     .flag = 1,
     .doc = "Comma list of dotted paths; the first present scalar is the first "
        "folder, else `_default`."},
    {.name = "batch_partition_fields",
     .section = SK_EOPT_TRANSFORM,
     .type = SK_EOPT_STRING,
     .def = NULL,
     .offset = CFG(route.partition_fields),
     .flag = 1,
     .doc = "Comma list of dotted paths feeding one partition column; the "
        "first present scalar gives `{prefix}{name}={value}`, else "
        "`{prefix}{name}=__HIVE_DEFAULT_PARTITION__`. The name is "
        "`batch_partition_name`, by default the last segment of the first "
        "path: `detail.tenant_id,truck.tenant_id` gives `p_tenant_id=`."},
    {.name = "batch_partition_name",
     .section = SK_EOPT_TRANSFORM,
     .type = SK_EOPT_STRING,
     .def = "last segment of the first partition path",
     .offset = CFG(route.partition_name),
     .computed = 1,
     .flag = 1,
     .doc = "The partition column's folder name (before `=`, after "
        "`time_partition_prefix`), 1-64 bytes without `/`, escaped like a "
        "value."},
    {.name = "batch_partition_naming",
     .section = SK_EOPT_TRANSFORM,
     .type = SK_EOPT_CHOICE,
     .def = "column",
     .choices = naming_modes,
     .offset = CFG(route.partition_per_path),
     .flag = 1,
     .doc = "`column`: every path's values go under the one name above. "
        "`per_path`: each path names its own folder "
        "(`p_detail.tenant_id=`, `p_truck.tenant_id=`), the layout of "
        "skippr 0.1; a state that wrote it is refused under "
        "`column` and keeps it with this setting."},
    {.name = "batch_time_fields",
     .section = SK_EOPT_TRANSFORM,
     .type = SK_EOPT_STRING,
     .def = NULL,
     .offset = CFG(route.time_fields),
     .flag = 1,
     .doc = "Comma list; the first value that parses as a time."},
    {.name = "batch_time_unit",
     .section = SK_EOPT_TRANSFORM,
     .type = SK_EOPT_CHOICE,
     .def = "day when time fields are set",
     .choices = time_units,
     .offset = SIZE_MAX,
     .computed = 1,
     .flag = 1,
     .doc = "`year`, `month`, `day` or `hour`: which time folders to write."},
    {.name = "time_partition_prefix",
     .section = SK_EOPT_TRANSFORM,
     .type = SK_EOPT_STRING,
     .def = "",
     .offset = CFG(route.prefix),
     .flag = 1,
     .doc = "Text before every partition and time folder name, e.g. `p_`."},
    {.name = NULL}};

const sk_engine_option *sk_engine_option_find(sk_eopt_section section,
                                              const char *key)
{
    for (const sk_engine_option *o = sk_engine_options; o->name; o++)
        if (o->section == section && strcmp(o->name, key) == 0)
            return o;
    return NULL;
}
