/* Config: the seed's shape loads; every error names file:line:col. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/config.h"
#include "config/options.h"

static const char *write_yaml(const char *text)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/skippr-test-config-%d.yml",
             (int)getpid());
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

static const char *seed =
    "skippr:\n"
    "  workspace: ws\n"
    "  skipprd_el_storage_mode: local\n"
    "pipelines:\n"
    "  gdpr:\n"
    "    type: copy\n"
    "    data_source: data_sources.src\n"
    "    data_sink: data_sinks.dst\n"
    "    buffer_threshold_seconds: 86400\n"
    "    transform:\n"
    "      namespace_fields: event_type\n"
    "      batch_partition_fields: detail.tenant_id,truck.tenant_id\n"
    "      batch_time_fields: timestamp\n"
    "      batch_time_unit: day\n"
    "      time_partition_prefix: p_\n"
    "data_sources:\n"
    "  src:\n"
    "    File:\n"
    "      path: ${SKIPPR_TEST_IN}\n"
    "      prefix: ${SKIPPR_TEST_UNSET:-dump}\n"
    "data_sinks:\n"
    "  dst:\n"
    "    File:\n"
    "      path: /out\n";

static int load_err(const char *text, const char *pipeline, char *msg,
                    size_t cap)
{
    sk_yaml_doc *doc = NULL;
    sk_cfg_err err = {""};
    int rc = sk_yaml_load(write_yaml(text), &doc, &err);
    if (rc == 0) {
        sk_pipeline_cfg cfg;
        rc = sk_config_pipeline(doc, pipeline, &cfg, &err);
    }
    snprintf(msg, cap, "%s", err.msg);
    sk_yaml_free(doc);
    return rc;
}

static void test_seed_loads(void **state)
{
    (void)state;
    setenv("SKIPPR_TEST_IN", "/data/in", 1);
    sk_yaml_doc *doc;
    sk_cfg_err err;
    assert_int_equal(sk_yaml_load(write_yaml(seed), &doc, &err), 0);
    sk_pipeline_cfg cfg;
    assert_int_equal(sk_config_pipeline(doc, "gdpr", &cfg, &err), 0);
    assert_string_equal(cfg.workspace, "ws");
    assert_int_equal(cfg.buffer_threshold_seconds, 86400);
    assert_string_equal(cfg.route.partition_fields,
                        "detail.tenant_id,truck.tenant_id");
    assert_int_equal(cfg.route.time_unit, SK_TIME_UNIT_DAY);
    assert_string_equal(cfg.source.plugin, "File");
    assert_string_equal(sk_ymap_get(cfg.source.options, "path")->value,
                        "/data/in");
    assert_string_equal(sk_ymap_get(cfg.source.options, "prefix")->value,
                        "dump");
    sk_yaml_free(doc);
}

static void expect(const char *text, const char *pipeline, const char *pos,
                   const char *words)
{
    char msg[1024];
    assert_int_not_equal(load_err(text, pipeline, msg, sizeof msg), 0);
    if (!strstr(msg, pos) || !strstr(msg, words))
        fail_msg("error '%s' lacks '%s' or '%s'", msg, pos, words);
}

static void test_errors_name_position(void **state)
{
    (void)state;
    setenv("SKIPPR_TEST_IN", "/data/in", 1);
    char buf[4096];
    /* An unknown pipeline key. */
    snprintf(buf, sizeof buf, "%s", seed);
    char *p = strstr(buf, "    buffer_threshold_seconds");
    memcpy(p, "    buffer_treshold_seconds ", 28);
    expect(buf, "gdpr", ":9:5:", "unknown key 'buffer_treshold_seconds'");
    /* type: ingest and cdc are refused clearly. */
    snprintf(buf, sizeof buf, "%s", seed);
    memcpy(strstr(buf, "type: copy"), "type: cdc ", 10);
    expect(buf, "gdpr", ":6:11:", "'cdc' is not supported");
    /* Unset variable without default. */
    setenv("SKIPPR_TEST_IN", "", 1);
    unsetenv("SKIPPR_TEST_IN");
    expect(seed, "gdpr", ":19:13:", "SKIPPR_TEST_IN is not set");
    setenv("SKIPPR_TEST_IN", "/data/in", 1);
    /* Bad time unit; missing source; syntax error. */
    snprintf(buf, sizeof buf, "%s", seed);
    memcpy(strstr(buf, "unit: day"), "unit: wek", 9);
    expect(buf, "gdpr", ":14:24:", "must be year, month, day or hour");
    snprintf(buf, sizeof buf, "%s", seed);
    memcpy(strstr(buf, "data_sources.src"), "data_sources.xyz", 16);
    expect(buf, "gdpr", ":7:18:", "'xyz' is not defined");
    expect("a: [1, 2\n", "x", ":2:1:", "");
    expect(seed, "nope", ":5:3:", "no pipeline named 'nope' (defined: gdpr)");
    expect("skippr:\n  skipprd_el_storage_mode: gcs\n", "x", ":2:28:",
           "'gcs' must be local or s3");
    expect("skippr:\n  skipprd_el_storage_mode: s3\n", "x", ":2:28:",
           "needs 'state_store: data_sinks.NAME'");
    expect("skippr:\n  state_store: data_sinks.st\n", "x", ":2:16:",
           "used only with skipprd_el_storage_mode: s3");
    expect("skippr:\n  skipprd_el_storage_mode: s3\n"
           "  state_store: data_sinks.st\n", "x", ":3:16:",
           "'st' is not defined under data_sinks:");
    expect("skippr:\n  state_lease_seconds: 1\n", "x", ":2:24:", "");
    /* validate takes true or false only. */
    snprintf(buf, sizeof buf, "%s", seed);
    p = strstr(buf, "    transform:");
    memmove(p + 20, p, strlen(p) + 1);
    memcpy(p, "    validate: often\n", 20);
    expect(buf, "gdpr", ":10:15:", "'often' must be true");
}

/* validate: false turns on the router's skim mode. */
static void test_validate_false(void **state)
{
    (void)state;
    setenv("SKIPPR_TEST_IN", "/data/in", 1);
    char buf[4096];
    const char *values[] = {"false\n", "true\n", NULL};
    for (int i = 0; i < 3; i++) {
        snprintf(buf, sizeof buf, "%s", seed);
        if (values[i]) {
            char *p = strstr(buf, "    transform:");
            size_t add = 14 + strlen(values[i]);
            memmove(p + add, p, strlen(p) + 1);
            memcpy(p, "    validate: ", 14);
            memcpy(p + 14, values[i], strlen(values[i]));
        }
        sk_yaml_doc *doc = NULL;
        sk_cfg_err err = {""};
        assert_int_equal(sk_yaml_load(write_yaml(buf), &doc, &err), 0);
        sk_pipeline_cfg cfg;
        assert_int_equal(sk_config_pipeline(doc, "gdpr", &cfg, &err), 0);
        assert_int_equal(cfg.route.skim, i == 0);
        sk_yaml_free(doc);
    }
}

/* The options table gives each setting its default and its bounds: a
 * pipeline that sets nothing gets the documented defaults, and a value
 * past a bound is refused with the range. */
static void test_option_table(void **state)
{
    (void)state;
    setenv("SKIPPR_TEST_IN", "/data/in", 1);
    sk_yaml_doc *doc;
    sk_cfg_err err;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", seed);
    char *p = strstr(buf, "    buffer_threshold_seconds: 86400\n");
    memmove(p, p + 35, strlen(p + 35) + 1);
    assert_int_equal(sk_yaml_load(write_yaml(buf), &doc, &err), 0);
    sk_pipeline_cfg cfg;
    assert_int_equal(sk_config_pipeline(doc, "gdpr", &cfg, &err), 0);
    assert_int_equal(cfg.buffer_threshold_seconds, 300);
    assert_int_equal(cfg.max_object_bytes, 1LL << 30);
    assert_int_equal(cfg.wal_disk_budget, 8LL << 30);
    assert_int_equal(cfg.memory_budget, 256LL << 20);
    assert_int_equal(cfg.max_record_bytes, 16LL << 20);
    assert_int_equal(cfg.list_batch, 4096);
    assert_int_equal(cfg.upload_concurrency, 8);
    assert_int_equal(cfg.max_inflate_ratio, 100);
    assert_int_equal(cfg.multiline, SK_MULTILINE_JSON);
    assert_int_equal(cfg.route.skim, 0);
    assert_string_equal(cfg.workspace, "ws"); /* the seed names it */
    assert_int_equal(cfg.storage_mode, SK_STORAGE_LOCAL);
    assert_int_equal(cfg.lease_seconds, 30);
    assert_null(cfg.metrics_listen);
    assert_null(cfg.route.partition_name); /* computed by the router */
    assert_int_equal(cfg.route.partition_per_path, 0);
    sk_yaml_free(doc);
    /* every applied default parses, lies within its bounds or is one of
     * its choices; every key is applied from the table but the few read
     * by hand (a list, references, a path made absolute, the routing map,
     * the type with its own refusals) and the computed ones */
    static const char *const by_hand[] = {
        "state_store", "state_dir", "plugin_dirs", "type", "data_source",
        "data_sink", "transform", NULL};
    for (const sk_engine_option *o = sk_engine_options; o->name; o++) {
        assert_non_null(o->doc);
        int hand = 0;
        for (size_t i = 0; by_hand[i]; i++)
            hand |= strcmp(by_hand[i], o->name) == 0;
        if (o->offset == SIZE_MAX && !o->computed && !hand)
            fail_msg("%s is neither applied from the table nor listed as "
                     "read by hand", o->name);
        if (o->offset == SIZE_MAX || o->computed ||
            o->type == SK_EOPT_STRING)
            continue;
        if (o->type == SK_EOPT_CHOICE) {
            int found = 0;
            for (size_t i = 0; o->choices[i]; i++)
                found |= strcmp(o->choices[i], o->def) == 0;
            assert_true(found);
            continue;
        }
        int64_t v;
        assert_int_equal(sk_parse_size(o->def, &v), 0);
        assert_true(v >= o->lo && v <= o->hi);
    }
    snprintf(buf, sizeof buf, "%s", seed);
    p = strstr(buf, "86400");
    memmove(p + 8, p + 5, strlen(p + 5) + 1);
    memcpy(p, "99999999", 8);
    expect(buf, "gdpr", ":9:31:", "99999999 is out of range [0, 604800]");
    snprintf(buf, sizeof buf, "%s", seed);
    p = strstr(buf, "    transform:");
    memmove(p + 30, p, strlen(p) + 1);
    memcpy(p, "    multiline_records: pretty\n", 30);
    expect(buf, "gdpr", ":10:24:",
           "'pretty' must be json, compact or dead_letter");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_loads),
        cmocka_unit_test(test_errors_name_position),
        cmocka_unit_test(test_validate_false),
        cmocka_unit_test(test_option_table),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char path[64];
    snprintf(path, sizeof path, "/tmp/skippr-test-config-%d.yml", (int)getpid());
    remove(path);
    return rc;
}
