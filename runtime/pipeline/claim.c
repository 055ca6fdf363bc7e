/* The claim: a state's mark on the sink it writes, so that a second state
 * (a lost state folder, another workspace, a new box with local state)
 * cannot copy everything again beside the first copy unnoticed.
 *
 * Before the first byte goes to the sink, the run reads
 * {sink}/_skippr/claims/{hash}.json, where hash is config/identity.h's
 * hash of the source and the transform (and the shard, when sharded):
 * one claim per copy of one source into one sink. Absent, the run writes
 * it with its state id, only if still absent (store_put "*"). Present
 * with its own state id, it goes on. Present with another, the run stops
 * before writing anything, naming the other state, where it was, and the
 * two ways on, unless allow_second_copy is set: then it writes a second
 * copy beside the first (object names carry the state id) and the claim
 * stays the first state's.
 *
 * A sink without store_get and store_put (Kafka, MQTT, HTTP, stdout)
 * cannot hold a claim: the run says so once, at debug level. Names
 * starting with '_' are skipped by Athena, Hive and Spark, and
 * docs/OPERATIONS.md says to leave the folder in place. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/identity.h"
#include "pipeline/engine.h"

#define CLAIM_MAX 16384

/* The claim's key under the sink's prefix, into key (cap bytes). */
static int claim_key(engine *e, char *key, size_t cap)
{
    const sk_pipeline_cfg *cfg = e->cfg;
    uint64_t h = sk_identity_hash(e->doc, cfg, SK_ID_SOURCE |
                                  SK_ID_TRANSFORM);
    if (!h)
        return SKIPPR_NOMEM;
    if (cfg->shard_count > 1) {
        uint32_t sh[2] = {cfg->shard_index, cfg->shard_count};
        h ^= sk_hash64(sh, sizeof sh);
    }
    snprintf(key, cap, "_skippr/claims/%016" PRIx64 ".json", h);
    return SKIPPR_OK;
}

/* This state's claim as JSON text: the caller frees it (free()). */
static char *claim_text(engine *e)
{
    char host[256] = "", when[32] = "", where[4400];
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(where, sizeof where, "%s:%s", host, sk_state_dir(e->st));
    char *def = sk_identity_text(e->doc, e->cfg, SK_ID_SOURCE |
                                 SK_ID_TRANSFORM);
    json_t *j = def ? json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s, s:s}",
                                "state_id", sk_state_id(e->st), "workspace",
                                e->cfg->workspace, "pipeline", e->cfg->name,
                                "state", where, "state_store",
                                e->store ? e->store->label : NULL,
                                "claimed_at", when, "definition", def)
                    : NULL;
    char *text = j ? json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    sk_free(def);
    return text;
}

/* The claim of another state (parsed from buf): refuse, or with
 * allow_second_copy go on. */
static int other_claim(engine *e, const char *key, const char *buf,
                       size_t len)
{
    json_error_t jerr;
    json_t *j = json_loadb(buf, len, 0, &jerr);
    const char *id = json_string_value(json_object_get(j, "state_id"));
    const char *where = json_string_value(json_object_get(j, "state"));
    const char *store = json_string_value(json_object_get(j,
                                                          "state_store"));
    const char *pipe = json_string_value(json_object_get(j, "pipeline"));
    const char *ws = json_string_value(json_object_get(j, "workspace"));
    int rc = SKIPPR_OK;
    if (!id) {
        sk_error("%s: claim %s is not one skippr wrote (no state_id); "
                 "remove it only if nothing else writes this sink",
                 e->sink->label, key);
        rc = SKIPPR_CHANGED;
    } else if (strcmp(id, sk_state_id(e->st)) == 0) {
        sk_debug("%s: claimed by this state (%s)", e->sink->label, key);
    } else if (e->cfg->allow_second_copy) {
        sk_warn("%s: state %s (pipeline %s, workspace %s, at %s) already "
                "copies this source here; writing a second copy beside it "
                "as state %s (allow_second_copy)", e->sink->label, id,
                pipe ? pipe : "?", ws ? ws : "?", where ? where : "?",
                sk_state_id(e->st));
    } else {
        sk_error("%s: another state already copies this source here: "
                 "state %s (pipeline %s, workspace %s, at %s%s%s; claim "
                 "%s). This state (%s, in %s) would copy everything again "
                 "beside it. Either run with that state (its state_dir, or "
                 "restore it from its state_store), or, if a second copy "
                 "is wanted, set allow_second_copy: true "
                 "(--allow-second-copy true). Nothing was written.",
                 e->sink->label, id, pipe ? pipe : "?", ws ? ws : "?",
                 where ? where : "?", store ? ", kept in " : "",
                 store ? store : "", key, sk_state_id(e->st),
                 sk_state_dir(e->st));
        rc = SKIPPR_CHANGED;
    }
    json_decref(j);
    return rc;
}

int pl_claim_sink(engine *e)
{
    const skippr_sink_ops *ops = e->sink->plugin->sink;
    if (!SKIPPR_OPS_HAS(skippr_sink_ops, ops, store_put) ||
        !ops->store_get || !ops->store_put) {
        sk_debug("%s: cannot hold a claim; a second state writing it "
                 "would go unnoticed", e->sink->label);
        return SKIPPR_OK;
    }
    char key[64];
    int rc = claim_key(e, key, sizeof key);
    char *buf = rc ? NULL : sk_malloc(CLAIM_MAX);
    if (!rc && !buf)
        rc = SKIPPR_NOMEM;
    for (int attempt = 0; !rc && attempt < 2; attempt++) {
        size_t got = 0;
        uint64_t size = 0;
        rc = ops->store_get(e->sink->ctx, key, 0, buf, CLAIM_MAX, &got,
                            &size, NULL, 0);
        if (rc == SKIPPR_OK) {
            rc = other_claim(e, key, buf, got);
            sk_free(buf);
            return rc;
        }
        if (rc != SKIPPR_NOENT)
            break;
        char *text = claim_text(e);
        rc = !text ? SKIPPR_NOMEM
                   : ops->store_put(e->sink->ctx, key, text, strlen(text),
                                    "*", NULL, 0);
        free(text); /* jansson's, from malloc */
        if (rc == SKIPPR_OK) {
            sk_info("%s: claimed for state %s (%s)", e->sink->label,
                    sk_state_id(e->st), key);
            sk_free(buf);
            return SKIPPR_OK;
        }
        if (rc == SKIPPR_CHANGED)
            rc = SKIPPR_OK; /* another run claimed it first: read it */
    }
    sk_free(buf);
    if (!sk_instance_logged_error(e->sink)) /* one line for one cause */
        sk_error("%s: cannot read or write its claim %s: %s",
                 e->sink->label, key,
                 skippr_status_name(rc ? rc : SKIPPR_CHANGED));
    return rc ? rc : SKIPPR_CHANGED;
}
