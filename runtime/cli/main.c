/* skipprd: the command line. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/common.h"
#include "base/fault.h"
#include "cli/cliflags.h"
#include "cli/commands.h"
#include "config/config.h"
#include "pipeline/pipeline.h"

static const char usage[] =
    "usage: skipprd <command> [options]\n"
    "\n"
    "Copy records between systems without changing a byte, re-laid out by\n"
    "the fields inside them, exactly once.\n"
    "\n"
    "commands:\n"
    "  sync --pipeline NAME [--once]   run a pipeline (continuously, or with\n"
    "                                  --once: copy everything new, flush,\n"
    "                                  exit)\n"
    "  validate [--pipeline NAME] [--reach]\n"
    "                                  check the config and plugin options;\n"
    "                                  --reach: also reach each source, sink\n"
    "                                  and state store with its credentials\n"
    "                                  (the preflight sync runs first)\n"
    "  verify --pipeline NAME [--json] [--since-state]\n"
    "                                  read the source as sync does and the\n"
    "                                  sink's objects, and report whether\n"
    "                                  every record is in the sink once,\n"
    "                                  byte for byte, under its partition\n"
    "                                  (exit 0: clean; 6: not clean);\n"
    "                                  --since-state: only what the copy\n"
    "                                  finished since the last such verify;\n"
    "                                  with --shard I/N (--shards N): read\n"
    "                                  shard I's share, store its digests;\n"
    "                                  then --merge-shards N compares them\n"
    "  status --pipeline NAME          show units done, slices buffered and\n"
    "                                  pending, and whether it is running\n"
    "  plugins [--json]                list the plugins found and their\n"
    "                                  options (--json: as data, for\n"
    "                                  tools such as the config reference)\n"
    "\n"
    "options:\n"
    "  -c, --config FILE   config file (default: $SKIPPR_CONFIG, else\n"
    "                      ./skippr.yml)\n"
    "  -p, --pipeline NAME pipeline to act on\n"
    "      --once          drain and exit (sync)\n"
    "  -t, --threads N     worker threads (overrides skippr.threads)\n"
    "      --shard I/N     copy shard I (0..N-1) of N: the units whose\n"
    "                      folder hashes to I, with state of its own\n"
    "      --shards N      the same, I from $JOB_COMPLETION_INDEX\n"
    "                      (Kubernetes Indexed Job) or\n"
    "                      $AWS_BATCH_JOB_ARRAY_INDEX\n"
    "  -v, --verbose       more logging (repeat for debug)\n"
    "  -q, --quiet         errors only\n"
    "      --no-progress   never draw the progress line\n"
    "      --log-format F  text (default) or json: one JSON object a line\n"
    "      --metrics-listen ADDR:PORT\n"
    "                      serve Prometheus metrics at /metrics (overrides\n"
    "                      skippr.metrics_listen)\n"
    "  -h, --help          this text\n"
    "      --version       print the version\n"
    "\n"
    "A pipeline by flags alone, instead of a YAML file:\n"
    "  skipprd sync --source URL --sink URL [settings] [--once]\n"
    "  URLs: s3://BUCKET[/PREFIX], file://PATH or PATH,\n"
    "        kafka://HOST:PORT/TOPIC, mqtt[s]://HOST:PORT/TOPIC,\n"
    "        http[s]://... (a URL to fetch, or to POST to), - (stdout)\n"
    "  settings: --KEY VALUE for every pipeline and transform: key of the\n"
    "        YAML (--batch-time-fields timestamp, --buffer-threshold-seconds\n"
    "        86400, ...), dashes or underscores; --source-opt K=V and\n"
    "        --sink-opt K=V for plugin options; --workspace NAME,\n"
    "        --state-dir DIR; --pipeline NAME names it (default: cli).\n"
    "  validate with the same flags prints the equivalent YAML.\n";

static void on_signal(int sig)
{
    SK_UNUSED(sig);
    atomic_store(&sk_stop_requested, 1);
}

static int load(const char *path, sk_yaml_doc **doc)
{
    sk_cfg_err err;
    if (sk_yaml_load(path, doc, &err)) {
        sk_error("%s", err.msg);
        return -1;
    }
    return 0;
}

typedef struct cli_args {
    sk_cli_pipeline cli; /* a pipeline given by --source and --sink */
    int cli_flags;       /* flags that only a pipeline from flags takes */
    int from_flags;      /* --source or --sink was given */
    const char *config;
    int config_given;
    const char *pipeline;
    const char *cmd;
    int once, threads, no_progress, as_json, reach, since_state;
    long merge_shards; /* verify --merge-shards N; 0: none */
    long shard_index, shard_count; /* count 0: unsharded */
    const char *metrics_listen;
} cli_args;

enum {
    OPT_ONCE = 1000, OPT_VERSION, OPT_NO_PROGRESS, OPT_JSON, OPT_SOURCE,
    OPT_SINK, OPT_SOURCE_OPT, OPT_SINK_OPT, OPT_WORKSPACE, OPT_STATE_DIR,
    OPT_SHARD, OPT_SHARDS, OPT_LOG_FORMAT, OPT_METRICS_LISTEN, OPT_REACH,
    OPT_SINCE_STATE, OPT_MERGE_SHARDS,
    OPT_KEY = 2000 /* + index in keyflags */
};

static const struct option fixed_opts[] = {
    {"config", required_argument, NULL, 'c'},
    {"pipeline", required_argument, NULL, 'p'},
    {"threads", required_argument, NULL, 't'},
    {"once", no_argument, NULL, OPT_ONCE},
    {"reach", no_argument, NULL, OPT_REACH},
    {"since-state", no_argument, NULL, OPT_SINCE_STATE},
    {"merge-shards", required_argument, NULL, OPT_MERGE_SHARDS},
    {"verbose", no_argument, NULL, 'v'},
    {"quiet", no_argument, NULL, 'q'},
    {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {"source", required_argument, NULL, OPT_SOURCE},
    {"sink", required_argument, NULL, OPT_SINK},
    {"source-opt", required_argument, NULL, OPT_SOURCE_OPT},
    {"sink-opt", required_argument, NULL, OPT_SINK_OPT},
    {"workspace", required_argument, NULL, OPT_WORKSPACE},
    {"state-dir", required_argument, NULL, OPT_STATE_DIR},
    {"state_dir", required_argument, NULL, OPT_STATE_DIR},
    {"shard", required_argument, NULL, OPT_SHARD},
    {"shards", required_argument, NULL, OPT_SHARDS},
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
    {"metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN}};

enum {
    NFIXED = sizeof fixed_opts / sizeof *fixed_opts,
    NKEYFLAGS = 80
};

/* A whole decimal number in [lo, hi], or -1. */
static long parse_count(const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = s && *s ? strtol(s, &end, 10) : -1;
    if (!s || !*s || errno || *end || v < lo || v > hi)
        return -1;
    return v;
}

/* --shard I/N, or --shards N with I from the job's index. -1 when valid
 * (parsing goes on), else the exit code. */
static int parse_shard(cli_args *a, int explicit_index, const char *arg)
{
    const char *count = arg, *index = NULL, *from = NULL;
    char ibuf[32];
    if (explicit_index) {
        const char *slash = strchr(arg, '/');
        size_t il = slash ? (size_t)(slash - arg) : 0;
        if (slash && il < sizeof ibuf) {
            memcpy(ibuf, arg, il);
            ibuf[il] = '\0';
            index = ibuf;
            count = slash + 1;
        }
    } else if ((index = getenv("JOB_COMPLETION_INDEX"))) {
        from = "JOB_COMPLETION_INDEX";
    } else if ((index = getenv("AWS_BATCH_JOB_ARRAY_INDEX"))) {
        from = "AWS_BATCH_JOB_ARRAY_INDEX";
    } else {
        sk_error("--shards %s: neither "
                 "JOB_COMPLETION_INDEX nor AWS_BATCH_JOB_ARRAY_INDEX is set; "
                 "give the index with --shard I/%s", arg, arg);
        return 2;
    }
    a->shard_count = parse_count(count, 1, 65536);
    a->shard_index = a->shard_count > 0
                         ? parse_count(index, 0, a->shard_count - 1)
                         : -1;
    if (a->shard_count < 0 || a->shard_index < 0) {
        if (from)
            sk_error("--shards %s with %s=%s: want "
                     "a count of 1..65536 and an index below it", arg,
                     from, index);
        else
            sk_error("--shard %s: want I/N, N in "
                     "1..65536 and I in 0..N-1", arg);
        return 2;
    }
    return -1;
}

/* The long options: the fixed ones, then every pipeline setting and
 * transform key, spelt with underscores as in the YAML or with dashes;
 * keyflags[i] is the key of option OPT_KEY + i. Returns their count. */
static size_t build_longopts(struct option *longopts, const char **keyflags,
                             char (*dashed)[64])
{
    size_t nk = 0;
    memcpy(longopts, fixed_opts, sizeof fixed_opts);
    const char *const *lists[2] = {sk_config_setting_keys(),
                                   sk_config_transform_keys()};
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; lists[l][i] && nk + 2 <= NKEYFLAGS; i++) {
            const char *k = lists[l][i];
            keyflags[nk] = k;
            longopts[NFIXED + nk] =
                (struct option){k, required_argument, NULL, OPT_KEY + (int)nk};
            nk++;
            snprintf(dashed[nk], sizeof dashed[nk], "%s", k);
            for (char *d = dashed[nk]; *d; d++)
                *d = *d == '_' ? '-' : *d;
            keyflags[nk] = k;
            longopts[NFIXED + nk] = (struct option){
                dashed[nk], required_argument, NULL, OPT_KEY + (int)nk};
            nk++;
        }
    longopts[NFIXED + nk] = (struct option){NULL, 0, NULL, 0};
    return nk;
}

/* A --source-opt or --sink-opt K=V. Returns -1, or an exit code. */
static int add_plugin_opt(cli_args *a, int source, const char *kv)
{
    const char **v = source ? a->cli.source_opts : a->cli.sink_opts;
    size_t *n = source ? &a->cli.nsource_opts : &a->cli.nsink_opts;
    if (*n == SK_CLI_MAX_OPTS) {
        sk_error("too many plugin options");
        return 2;
    }
    v[(*n)++] = kv;
    a->cli_flags = 1;
    return -1;
}

/* One option c (from getopt_long) into a. Returns -1 to go on, or the
 * process's exit code (--help, --version, a bad option). */
static int take_option(cli_args *a, int c, const char *const *keyflags,
                       size_t nk)
{
    if (c >= OPT_KEY && c < OPT_KEY + (int)nk) {
        if (a->cli.nkeys == SK_CLI_MAX_OPTS) {
            sk_error("too many settings");
            return 2;
        }
        a->cli.keys[a->cli.nkeys] = keyflags[c - OPT_KEY];
        a->cli.values[a->cli.nkeys++] = optarg;
        a->cli_flags = 1;
        return -1;
    }
    switch (c) {
    case OPT_SOURCE: a->cli.source = optarg; break;
    case OPT_SINK: a->cli.sink = optarg; break;
    case OPT_SOURCE_OPT:
    case OPT_SINK_OPT: return add_plugin_opt(a, c == OPT_SOURCE_OPT, optarg);
    case OPT_WORKSPACE: a->cli.workspace = optarg; a->cli_flags = 1; break;
    case OPT_STATE_DIR: a->cli.state_dir = optarg; a->cli_flags = 1; break;
    case 'c': a->config = optarg; a->config_given = 1; break;
    case 'p': a->pipeline = optarg; break;
    case 't':
        a->threads = atoi(optarg);
        if (a->threads < 1 || a->threads > 256) {
            sk_error("--threads wants 1..256");
            return 2;
        }
        break;
    case OPT_ONCE: a->once = 1; break;
    case OPT_REACH: a->reach = 1; break;
    case OPT_SINCE_STATE: a->since_state = 1; break;
    case OPT_MERGE_SHARDS:
        if ((a->merge_shards = parse_count(optarg, 2, 65536)) < 0) {
            sk_error("--merge-shards wants the shard count, 2..65536");
            return 2;
        }
        break;
    case OPT_SHARD:
    case OPT_SHARDS: return parse_shard(a, c == OPT_SHARD, optarg);
    case 'v': sk_log_level++; break;
    case 'q': sk_log_level = SKIPPR_LOG_ERROR; break;
    case OPT_NO_PROGRESS: a->no_progress = 1; break;
    case OPT_METRICS_LISTEN: a->metrics_listen = optarg; break;
    case OPT_LOG_FORMAT:
        if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0) {
            sk_error("--log-format wants text or "
                     "json, not '%s'", optarg);
            return 2;
        }
        sk_log_json = strcmp(optarg, "json") == 0;
        a->no_progress |= sk_log_json;
        break;
    case OPT_JSON: a->as_json = 1; break;
    case 'h': fputs(usage, stdout); return 0;
    case OPT_VERSION:
        printf("skipprd %s (plugin ABI %u)\n", SKIPPR_VERSION_STRING,
               SKIPPR_ABI_VERSION);
        return 0;
    default: fputs(usage, stderr); return 2;
    }
    return -1;
}

/* The command line into a, checked. Returns -1 to go on, or the process's
 * exit code. */
static int parse_args(int argc, char **argv, cli_args *a)
{
    static char dashed[NKEYFLAGS][64];
    static const char *keyflags[NKEYFLAGS];
    static struct option longopts[NFIXED + NKEYFLAGS + 1];
    size_t nk = build_longopts(longopts, keyflags, dashed);
    memset(a, 0, sizeof *a);
    a->config = getenv("SKIPPR_CONFIG");
    int c, rc;
    while ((c = getopt_long(argc, argv, "c:p:t:vqh", longopts, NULL)) != -1)
        if ((rc = take_option(a, c, keyflags, nk)) >= 0)
            return rc;
    if (optind >= argc) {
        fputs(usage, stderr);
        return 2;
    }
    a->cmd = argv[optind];
    if (optind + 1 < argc) {
        sk_error("unexpected argument '%s'",
                 argv[optind + 1]);
        return 2;
    }
    if (!a->config || !*a->config)
        a->config = "skippr.yml";
    a->from_flags = a->cli.source || a->cli.sink;
    if (a->from_flags && a->config_given) {
        sk_error("give a pipeline by --config or by "
                 "--source and --sink, not both");
        return 2;
    }
    if (a->cli_flags && !a->from_flags) {
        sk_error("pipeline settings, --source-opt, "
                 "--sink-opt, --workspace and --state-dir go with --source "
                 "and --sink; with a config file, set them there");
        return 2;
    }
    return -1;
}

/* The config: the YAML that --source and --sink make (printed for
 * `validate`, to start a file from), or the config file. Returns -1 with
 * *doc (the caller's), or an exit code. */
static int load_doc(cli_args *a, sk_yaml_doc **doc)
{
    *doc = NULL;
    if (!a->from_flags)
        return load(a->config, doc) ? 1 : -1;
    a->cli.name = a->pipeline ? a->pipeline : "cli";
    sk_cfg_err err;
    char *yaml = NULL;
    int rc = sk_cli_load(&a->cli, doc, &yaml, &err);
    if (rc) {
        sk_error("%s", err.msg);
        return 2; /* the flags do not make a pipeline */
    }
    a->pipeline = a->cli.key;
    if (strcmp(a->cmd, "validate") == 0)
        fputs(yaml, stdout);
    sk_free(yaml);
    return -1;
}

/* `verify` of cfg: 0 clean, 6 not clean, 1 the verify could not run. */
static int run_verify(const cli_args *a, const sk_yaml_doc *doc,
                      const sk_pipeline_cfg *cfg)
{
    signal(SIGPIPE, SIG_IGN);
    sk_verify_opts o = {.as_json = a->as_json, .keep = 20,
                        .since_state = a->since_state,
                        .merge_shards = (uint32_t)a->merge_shards};
    int rc = sk_pipeline_verify(doc, cfg, &o);
    return rc == SKIPPR_OK ? 0 : rc == SKIPPR_CHANGED ? 6 : 1;
}

/* `status`, `verify` or `sync` of a->pipeline in doc. Returns the exit
 * code. */
static int run_pipeline(const cli_args *a, const sk_yaml_doc *doc)
{
    if (!a->pipeline) {
        sk_error("%s needs --pipeline NAME", a->cmd);
        return 2;
    }
    sk_pipeline_cfg cfg;
    sk_cfg_err err;
    if (sk_config_pipeline(doc, a->pipeline, &cfg, &err)) {
        sk_error("%s", err.msg);
        return 1;
    }
    if (a->threads)
        cfg.threads = a->threads;
    if (a->metrics_listen)
        cfg.metrics_listen = a->metrics_listen;
    cfg.shard_index = (uint32_t)a->shard_index;
    cfg.shard_count = (uint32_t)a->shard_count;
    if (strcmp(a->cmd, "status") == 0)
        return sk_pipeline_status(&cfg) ? 1 : 0;
    if (strcmp(a->cmd, "verify") == 0)
        return run_verify(a, doc, &cfg);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    sk_run_opts opts = {.once = a->once,
                        .progress = !a->no_progress && isatty(2) &&
                                    sk_log_level >= SKIPPR_LOG_INFO};
    int rc = sk_pipeline_run(doc, &cfg, &opts);
    if (rc == SKIPPR_LOCKED)
        return 3;
    if (rc == SK_RUN_CHANGED_SKIPPED)
        return 4;
    if (rc == SKIPPR_STOPPED)
        return 5; /* a --once run interrupted; progress saved */
    return rc ? 1 : 0;
}

/* Thousands of GETs in flight and thousands of growing objects need as
 * many descriptors: take the hard limit (a Debian box's soft limit is
 * 1,024, its hard limit 524,288 under systemd), as servers do. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int main(int argc, char **argv)
{
    sk_malloc_tune();
    raise_fd_limit();
    cli_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    if (sk_fault_init_from_env())
        return 2;
    if (strcmp(a.cmd, "plugins") == 0) {
        sk_yaml_doc *doc = NULL;
        if (access(a.config, F_OK) == 0 && load(a.config, &doc))
            return 1;
        rc = sk_cli_plugins(doc, a.as_json);
        sk_yaml_free(doc);
        return rc;
    }
    if (strcmp(a.cmd, "sync") != 0 && strcmp(a.cmd, "validate") != 0 &&
        strcmp(a.cmd, "status") != 0 && strcmp(a.cmd, "verify") != 0) {
        fprintf(stderr, "skipprd: error: unknown command '%s'\n\n%s", a.cmd,
                usage);
        return 2;
    }
    if ((a.since_state || a.merge_shards) && strcmp(a.cmd, "verify") != 0) {
        fprintf(stderr, "skipprd: error: --%s is an option of verify\n",
                a.since_state ? "since-state" : "merge-shards");
        return 2;
    }
    if (a.merge_shards && a.shard_count > 0) {
        fprintf(stderr, "skipprd: error: --merge-shards compares the "
                        "shards' stored digests: give it without --shard\n");
        return 2;
    }
    sk_yaml_doc *doc;
    if ((rc = load_doc(&a, &doc)) >= 0)
        return rc;
    if (strcmp(a.cmd, "validate") == 0) {
        /* The YAML went to stdout: the verdict goes to stderr. */
        if (a.from_flags)
            fflush(stdout);
        rc = sk_cli_validate(doc, a.pipeline, a.reach,
                          a.from_flags ? stderr : stdout);
    } else {
        rc = run_pipeline(&a, doc);
    }
    sk_yaml_free(doc);
    return rc;
}
