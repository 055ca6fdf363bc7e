/* skippr public ABI, version 2: what a plugin sees of the engine.
 *
 * A plugin is a shared object that exports one function,
 *
 *     const skippr_plugin *skippr_plugin_entry(void);
 *
 * returning a pointer to a static descriptor. The loader reads abi_version and
 * struct_size before any other field and refuses the plugin when they do not
 * match (see SKIPPR_ABI_VERSION). Ops structs carry their own struct_size, so
 * callbacks can be appended in later minor revisions without a rebuild of
 * older plugins; members are never reordered or removed within one ABI.
 *
 * Instances. The engine, not the plugin, allocates each instance context:
 * ctx_size bytes, zeroed, aligned for any type, freed by the engine after
 * destroy(). Before init() the engine writes every declared option into the
 * context at its offset (see skippr_option). A plugin therefore never owns its
 * root allocation and cannot leak it.
 *
 * Threads. Unless a callback says otherwise, the engine calls an instance from
 * one thread at a time. Different instances may be called concurrently: the
 * engine makes one sink instance per upload thread (the pipeline's
 * upload_concurrency), all with the same options, each writing different
 * objects.
 *
 * Only this header, status.h and version.h form the ABI. Plugins must not use
 * any other symbol of the engine.
 */
#ifndef SKIPPR_PLUGIN_H
#define SKIPPR_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SKIPPR_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define SKIPPR_EXPORT __attribute__((visibility("default")))
#else
#define SKIPPR_PRINTF(f, a)
#define SKIPPR_EXPORT
#endif

/* ------------------------------------------------------------------------ */
/* Options                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum skippr_opt_type {
    /* const char * in the context. NULL when unset and without default. */
    SKIPPR_OPT_STRING = 1,
    /* int64_t in the context. */
    SKIPPR_OPT_INT = 2,
    /* int in the context, 0 or 1. YAML true/false/yes/no/1/0. */
    SKIPPR_OPT_BOOL = 3,
    /* Like STRING, but the engine never prints the value, at any log level. */
    SKIPPR_OPT_SECRET = 4,
    /* ABI 2. Every key that starts with the option's name, which ends in
     * '.' (e.g. "kafka." takes kafka.acks and kafka.socket.timeout.ms).
     * const skippr_kv * in the context: the keys without the prefix and
     * their values, ending with {NULL, NULL}; never NULL. Values are
     * treated as secrets. */
    SKIPPR_OPT_PREFIX = 5
} skippr_opt_type;

/* One entry of a SKIPPR_OPT_PREFIX option. */
typedef struct skippr_kv {
    const char *key;
    const char *value;
} skippr_kv;

/* One row of a plugin's options table; a table ends with a row whose name is
 * NULL. The same table validates the YAML (unknown keys are refused with
 * file:line:col), fills the instance context and generates the config
 * reference. Strings written into the context belong to the engine and stay
 * valid until destroy() returns. A STRING option may also be given as a
 * YAML list of scalars: the context then gets them joined with ','. */
typedef struct skippr_option {
    const char *name;          /* YAML key, e.g. "path" */
    skippr_opt_type type;
    const char *default_value; /* text form; NULL means no default */
    int required;              /* SKIPPR_OPT_* bits below; non-zero with
                                * SKIPPR_OPT_REQUIRED: a missing key is a
                                * config error */
    size_t offset;             /* offsetof(your_ctx, member) */
    const char *doc;           /* one sentence for the reference */
} skippr_option;

/* skippr_option.required bits. */
#define SKIPPR_OPT_REQUIRED 1
/* Appended within ABI 2: the value is a file system path, and a relative
 * one reaches the plugin made absolute against the config file's folder
 * (flags: the working directory). An engine from before it takes any
 * non-zero `required` as required, so give it with SKIPPR_OPT_REQUIRED. */
#define SKIPPR_OPT_FS_PATH 2

/* ------------------------------------------------------------------------ */
/* Host services                                                            */
/* ------------------------------------------------------------------------ */

typedef enum skippr_log_level {
    SKIPPR_LOG_ERROR = 0,
    SKIPPR_LOG_WARN = 1,
    SKIPPR_LOG_INFO = 2,
    SKIPPR_LOG_DEBUG = 3
} skippr_log_level;

/* One header of a streaming message (a Kafka header, an MQTT v5 user
 * property). value need not be text. */
typedef struct skippr_header {
    const char *name; /* NUL-terminated */
    const void *value;
    size_t len;
} skippr_header;

/* A message from a streaming source (Kafka, MQTT, HTTP push): one record,
 * or with SKIPPR_MSG_DOCUMENT a whole document of records. Everything is
 * borrowed: the engine copies what it keeps before emit() returns. Set
 * struct_size to sizeof(skippr_message). */
typedef struct skippr_message {
    uint32_t struct_size;
    const char *unit;     /* e.g. "topic/3"; progress is tracked per unit */
    int64_t position;     /* increases within a unit; acked once durable */
    const void *data;     /* the record's exact bytes */
    size_t len;
    const void *key;      /* routing field $key (a Kafka key); may be NULL */
    size_t key_len;
    const char *topic;    /* routing field $topic; may be NULL */
    const skippr_header *headers; /* routing fields $header.NAME */
    size_t nheaders;
    /* Appended within ABI 2: read only when struct_size covers them. */
    uint32_t flags;       /* SKIPPR_MSG_* */
    const char *format;   /* a document's format: "json" (NDJSON or an
                           * array), "csv" or "xml"; NULL: the source's
                           * format option, else the data decides */
    char *problem;        /* a document: the engine writes here why its
                           * first set-aside record was set aside ("" when
                           * none was); may be NULL */
    size_t problem_cap;
} skippr_message;

/* skippr_message.flags: data is a whole document (an HTTP body), framed
 * like a file of its format: many records, all at the message's position.
 * Records that cannot be read are dead-lettered, the others kept. Only
 * sources with SKIPPR_SOURCE_DOCUMENTS may emit documents. */
#define SKIPPR_MSG_DOCUMENT 1u

/* Services the engine offers one instance. The pointer passed to init() stays
 * valid until destroy() returns. Every function is safe to call from any
 * thread. */
typedef struct skippr_host {
    uint32_t struct_size;
    /* Log a line tagged with the instance's name. Never pass secrets. */
    void (*log)(const struct skippr_host *host, int level, const char *fmt,
                ...) SKIPPR_PRINTF(3, 4);
    /* Add delta to a named counter. The running process shows it: in the
     * run's last lines ("S3 sink (...): objects_written=12"), and with
     * metrics_listen as skippr_plugin_total{side,name="NAME"} (names
     * "retries_CAUSE" as skippr_retries_total, "requests_in_flight" as a
     * gauge). `skipprd status` reads the state, not a running process,
     * and does not show them. */
    void (*counter_add)(const struct skippr_host *host, const char *name,
                        int64_t delta);
    /* Non-zero once the engine is shutting down: long calls should return
     * SKIPPR_STOPPED promptly. */
    int (*should_stop)(const struct skippr_host *host);
    /* Streaming sources, only from within poll() and on its thread: hand
     * one message to the engine. SKIPPR_OK: taken (or dropped because a
     * message at or after this position of the unit is already durable;
     * the counter "duplicates_dropped" says so). Another status: stop
     * polling and return it. */
    int (*emit)(const struct skippr_host *host, const skippr_message *msg);
    void *impl; /* engine-private */
    /* Appended in 0.1 (check with SKIPPR_HOST_HAS): the bytes this
     * instance may hold in memory for data in flight (read ahead, parts
     * being assembled); the pipeline's memory_budget. 0 = no guidance. */
    int64_t memory_budget;
    /* Appended in 0.1: SKIPPR_HOST_* bits saying what this engine does. */
    uint32_t flags;
    /* ABI 2, streaming sources, only from within poll(): the position
     * after the last durable message of unit (the next one wanted):
     * SKIPPR_OK and *next, or SKIPPR_NOENT when nothing of it is durable.
     * A source resumes each unit there, so nothing durable is read again. */
    int (*position)(const struct skippr_host *host, const char *unit,
                    int64_t *next);
    /* ABI 2, streaming sources, only from within poll(): make every message
     * emitted so far durable now, and ack() them before returning (a Kafka
     * source calls it when partitions are revoked). */
    int (*sync)(const struct skippr_host *host);
    /* Appended within ABI 2 (check with SKIPPR_HOST_HAS): CRC32C
     * (Castagnoli, as S3's x-amz-checksum-crc32c and the object info's
     * crc32c) of n bytes at p, continuing from crc (0 to start). The
     * engine's own implementation, hardware-assisted where it can be. */
    uint32_t (*crc32c)(uint32_t crc, const void *p, size_t n);
    /* Appended within ABI 2 (check with SKIPPR_HOST_HAS): non-zero once
     * this process may no longer write: with the state in a bucket, its
     * lease lapsed (the process was paused, its box cut off) or another
     * process took it, and may be writing the same objects by now. A sink
     * asks right before each request that writes, as late as it can (the
     * S3 sink: libcurl's CURLOPT_PREREQFUNCTION, after the connection is
     * made and before the first byte is sent), and returns SKIPPR_LOCKED
     * without sending it. Always 0 with the state in a folder. */
    int (*fenced)(const struct skippr_host *host);
} skippr_host;

/* host->flags: the engine calls skippr_sink_ops.sync() before it records
 * objects as written, so a sink with sync() may defer durability to it. */
#define SKIPPR_HOST_SYNCS_SINKS 1u
/* host->flags: the run is `--once`. A streaming source reads what exists
 * when it starts (Kafka: up to the high watermarks; MQTT: until idle), then
 * poll() returns SKIPPR_END. */
#define SKIPPR_HOST_ONCE 2u

/* host->flags: the engine takes units by name first. A listable source
 * that declares SKIPPR_SOURCE_NAMES_FIRST may then report a unit with
 * version NULL (size -1, modified 0) before reading any of its metadata;
 * see skippr_unit_cb for what the callback answers. */
#define SKIPPR_HOST_NAMES_FIRST 4u

/* host->flags: the instance is made only to check that its system can be
 * reached (`skipprd validate --reach`). init() should reach it as a run
 * would, but take nothing over: join no consumer group, fence no
 * producer. The engine then calls probe(), if the plugin has one, and
 * destroy(). */
#define SKIPPR_HOST_CHECK 8u

/* Non-zero when the engine's host struct has `field` (hosts only grow). */
#define SKIPPR_HOST_HAS(host, field)                                       \
    ((host)->struct_size >= offsetof(skippr_host, field) +                 \
                                sizeof((host)->field))

/* ------------------------------------------------------------------------ */
/* Sources                                                                  */
/* ------------------------------------------------------------------------ */

/* A unit of source data: an object, a file, a topic-partition. */
typedef struct skippr_unit {
    const char *id;      /* unique within the source; sorts by strcmp */
    const char *version; /* ETag, mtime or similar; "" when none */
    int64_t size;        /* bytes, or -1 when unknown */
    /* Appended within ABI 2: when the unit last changed (S3's
     * Last-Modified, a file's mtime), Unix seconds; 0 when unknown. The
     * host reads it only from sources that declare SKIPPR_SOURCE_MODIFIED
     * (older plugins pass the three fields above). */
    int64_t modified;
} skippr_unit;

/* Called by list() once per unit. Pointers are borrowed for the call only.
 * Return 0 to continue, non-zero to stop listing early.
 *
 * A unit reported by name alone (version NULL; only under
 * SKIPPR_HOST_NAMES_FIRST, by a source that declares
 * SKIPPR_SOURCE_NAMES_FIRST) gets one more answer:
 * SKIPPR_UNIT_DESCRIBE, for "report it again, whole, next" (list()
 * reads its metadata then; a unit gone meanwhile is simply not reported).
 * 0 means the engine needs nothing more of it, and another non-zero
 * value stops listing after it, as for a whole unit. */
typedef int (*skippr_unit_cb)(void *cb_data, const skippr_unit *unit);
#define SKIPPR_UNIT_DESCRIBE 2

typedef struct skippr_source_ops {
    uint32_t struct_size;
    size_t ctx_size;
    const skippr_option *options;
    /* Set up an instance whose options are already in ctx. On failure, log
     * why and return a negative status; destroy() is still called. */
    int (*init)(void *ctx, const skippr_host *host);
    /* Release what init() and later calls acquired. ctx itself is the
     * engine's. May be called after a failed init(). */
    void (*destroy)(void *ctx);

    /* Listable sources. list() reports units in strictly ascending strcmp
     * order of id, starting after start_after (NULL: from the beginning). */
    int (*list)(void *ctx, const char *start_after, skippr_unit_cb cb,
                void *cb_data);
    /* Open a unit for reading its raw (possibly compressed) bytes from
     * offset. On SKIPPR_OK, *stream is the plugin's until close(). */
    int (*open)(void *ctx, const skippr_unit *unit, int64_t offset,
                void **stream);
    /* Read up to cap bytes. *n_out == 0 with SKIPPR_OK means end of unit. */
    int (*read)(void *ctx, void *stream, void *buf, size_t cap,
                size_t *n_out);
    void (*close)(void *ctx, void *stream);

    /* Streaming sources (NULL for listable ones). poll() emits messages via
     * host->emit for up to timeout_ms; SKIPPR_END when a --once run has
     * read everything it will. ack() is called, on the poll() thread, only
     * once every message of unit up to and including position is durable.
     * A unit resumes where host->position() says. */
    int (*poll)(void *ctx, int timeout_ms);
    int (*ack)(void *ctx, const char *unit, int64_t position);

    /* Optional (may be NULL), listable sources. A hint: these units will be
     * opened next, in this order. A plugin may start fetching them (within
     * its own memory bound) so that many requests are in flight; open()
     * must work the same whether or not a unit was hinted. The array and
     * its strings are borrowed for the call. */
    int (*prefetch)(void *ctx, const skippr_unit *units, size_t n);
    /* Appended within ABI 2: SKIPPR_SOURCE_* bits. */
    uint32_t flags;
    /* Appended within ABI 2; optional (test with SKIPPR_OPS_HAS, may be
     * NULL). The preflight, after init() and before anything is read:
     * check, with the credentials the run will use, that the source can
     * be listed and read where the options point (S3: the bucket answers
     * and the prefix can be listed; File: the folder can be read). On a
     * problem, log one error line saying what is wrong and what to do,
     * and return SKIPPR_FATAL (or SKIPPR_RETRY when the system could not
     * be reached after the plugin's own retries). */
    int (*probe)(void *ctx);
} skippr_source_ops;

/* skippr_source_ops.flags: a streaming source that emits documents
 * (SKIPPR_MSG_DOCUMENT), so the source's format may be csv or xml. */
#define SKIPPR_SOURCE_DOCUMENTS 1u
/* skippr_source_ops.flags: list() fills skippr_unit.modified. */
#define SKIPPR_SOURCE_MODIFIED 2u
/* skippr_source_ops.flags: under SKIPPR_HOST_NAMES_FIRST, list() reports
 * units by name first (skippr_unit_cb), which saves reading the metadata
 * of units the engine skips (the File source: a stat per file). */
#define SKIPPR_SOURCE_NAMES_FIRST 4u

/* ------------------------------------------------------------------------ */
/* Sinks                                                                    */
/* ------------------------------------------------------------------------ */

/* What the engine knows of an output object before writing it. The same
 * slice always yields the same key and the same bytes, so writing it again
 * after a crash must be harmless (idempotent). */
typedef struct skippr_object_info {
    const char *key;          /* path under the sink's prefix, '/'-separated */
    const char *slice_id;     /* stable id of the slice, e.g. "a1b2-00000007" */
    uint64_t size;            /* exact byte count that write() will deliver */
    uint32_t crc32c;          /* CRC32C of those bytes */
    const char *content_type; /* e.g. "application/x-ndjson" */
    /* ABI 2 */
    const char *partition;    /* the key's folders: "ns/p_x=v/p_year=..." */
    const char *namespace_name; /* its first folder, e.g. "order_created" */
    uint64_t records;         /* records in the object (header rows not
                               * counted) */
} skippr_object_info;

typedef struct skippr_sink_ops {
    uint32_t struct_size;
    size_t ctx_size;
    const skippr_option *options;
    int (*init)(void *ctx, const skippr_host *host);
    void (*destroy)(void *ctx);

    /* Begin an object. On SKIPPR_OK, *handle is the plugin's until
     * object_commit() or object_abort() is called, whatever they return. */
    int (*object_open)(void *ctx, const skippr_object_info *info,
                       void **handle);
    /* Append bytes. The buffer is borrowed for the call. */
    int (*object_write)(void *ctx, void *handle, const void *buf, size_t len);
    /* Make the object complete and visible, and durable unless the sink
     * defers that to sync() (see below). SKIPPR_OK means so: once durable,
     * the engine records the slice as committed and never writes it
     * again. */
    int (*object_commit)(void *ctx, void *handle);
    /* Discard a partly written object. */
    void (*object_abort)(void *ctx, void *handle);
    /* Optional (may be NULL). During recovery: SKIPPR_OK if the object
     * already exists with this slice id and checksum, SKIPPR_NOENT if it does
     * not exist, SKIPPR_CHANGED if something else is there. */
    int (*object_check)(void *ctx, const skippr_object_info *info);
    /* Appended in 0.1; optional (test with SKIPPR_OPS_HAS). Make every
     * object this instance committed since the last call durable, at once
     * (one syncfs instead of an fsync per file and folder). An engine whose
     * host->flags has SKIPPR_HOST_SYNCS_SINKS calls it after a batch of
     * commits and before it records any of them; on failure it records
     * none of them, and writes them again later. A sink may defer
     * durability to sync() only when that flag is set. */
    int (*sync)(void *ctx);
    /* ABI 2: SKIPPR_SINK_* bits. */
    uint32_t flags;

    /* Appended within ABI 2 (test with SKIPPR_OPS_HAS), for sinks whose
     * flags have SKIPPR_SINK_GROWS: objects that grow in place while their
     * slice is open, so each byte is written once (the File sink: a
     * temporary file in the object's final folder; S3: a multipart
     * upload). The engine appends a slice's bytes as they come, records
     * how long the object durably is, and after a crash reopens it at that
     * length. One thread at a time uses a handle, the instance's own.
     *
     * Open the growing object of info->key (info->size and crc32c are 0:
     * not known yet; unless its slice was sealed before the object was
     * opened, as when a small one is written whole at its seal: then they
     * are the object's, and a sink may send that CRC rather than take it
     * again). length 0: start it empty, replacing any earlier
     * attempt. length > 0: reopen it and cut it back to length bytes;
     * notes are every note grow_note() gave for it, in order (NULL, 0 when
     * none); SKIPPR_NOENT when it does not exist or holds fewer bytes. On
     * SKIPPR_OK *handle is the plugin's until grow_commit() or
     * grow_close(). */
    int (*grow_open)(void *ctx, const skippr_object_info *info,
                     uint64_t length, const char *notes, size_t notes_len,
                     void **handle);
    /* Append bytes; durable at the next sync(), or, with SKIPPR_SINK_PARTS,
     * when it returns. */
    int (*grow_write)(void *ctx, void *handle, const void *buf, size_t len);
    /* Make the object visible under its key (durable at the next sync());
     * info is its final one: size and crc32c are known now. The handle is
     * gone whatever it returns. */
    int (*grow_commit)(void *ctx, void *handle,
                       const skippr_object_info *info);
    /* Let go of the handle; the object stays as it is, to be reopened. */
    void (*grow_close)(void *ctx, void *handle);
    /* Remove the growing object of info->key, if any (a slice that never
     * reached a commit). SKIPPR_OK also when there was none. */
    int (*grow_discard)(void *ctx, const skippr_object_info *info);

    /* Appended within ABI 2, for sinks whose flags also have
     * SKIPPR_SINK_PARTS: an object is a list of parts (an S3 multipart
     * upload) and each grow_write() is one part, durable when it returns.
     * The engine keeps the bytes of a part until it has at least
     * grow_part_bytes() of them (in memory, and in its WAL across
     * commits); only the last write before grow_commit() may be smaller.
     * After each write the engine asks grow_note() for what a reopen needs
     * to know of that part (an upload id, the part's number and ETag): at
     * most cap bytes into buf, their count in *len. It records the note
     * durably with the length, and hands all of them back to grow_open(). */
    uint64_t (*grow_part_bytes)(void *ctx);
    int (*grow_note)(void *ctx, void *handle, char *buf, size_t cap,
                     size_t *len);

    /* Appended within ABI 2, for sinks whose flags also have
     * SKIPPR_SINK_STAGES. When wal_disk_budget cannot hold the tails of
     * growing objects (their bytes no part holds yet), the engine moves
     * them into the sink's own storage as staging pieces, each named by
     * the growing object (info->slice_id), its offset in it and a tag the
     * engine makes unique for every piece it stores (so that a store a
     * crashed run left in flight never replaces a newer piece), and reads
     * them back for the object's next part. stage_put stores len bytes,
     * durable when it returns; stage_get reads exactly those len bytes
     * back (SKIPPR_NOENT when there is no such piece); stage_clear removes every piece of info's object (SKIPPR_OK
     * also when there is none), once the object is complete. */
    int (*stage_put)(void *ctx, const skippr_object_info *info,
                     uint64_t offset, uint64_t tag, const void *buf,
                     size_t len);
    int (*stage_get)(void *ctx, const skippr_object_info *info,
                     uint64_t offset, uint64_t tag, void *buf, size_t len);
    int (*stage_clear)(void *ctx, const skippr_object_info *info);

    /* Appended within ABI 2; optional (test with SKIPPR_OPS_HAS, may be
     * NULL), for sinks with SKIPPR_SINK_STAGES. Make the staging piece
     * (offset, tag, len) of the handle's growing object that object's
     * next part, inside the sink's storage, without its bytes passing
     * through the engine (S3: UploadPartCopy). The engine calls it only
     * for pieces of at least SKIPPR_COPY_MIN_BYTES; the part then counts
     * as a grow_write() of len bytes (durable when it returns; grow_note() covers it). A sink
     * whose server cannot copy reads the piece and writes it instead. */
    int (*stage_copy)(void *ctx, void *handle, const skippr_object_info *info,
                      uint64_t offset, uint64_t tag, uint64_t len);

    /* Appended within ABI 2, for sinks whose flags also have
     * SKIPPR_SINK_STORE: a store of the engine's own state
     * (skipprd_el_storage_mode: s3). Keys are relative to the instance's
     * prefix. Every call is durable when it returns SKIPPR_OK; a failure
     * has been retried already and is logged.
     *
     * A sink without SKIPPR_SINK_STORE may still have store_get and
     * store_put (cond NULL or "*" only): the engine then keeps its claim
     * on the sink there (_skippr/claims/, docs/OPERATIONS.md), as it does
     * on every sink that has them.
     *
     * store_get reads up to cap bytes of key from offset into buf: *got
     * of them, *size the object's size, and its ETag into etag (etag_cap
     * bytes, NUL-terminated; may be NULL). SKIPPR_NOENT when there is no
     * such key. */
    int (*store_get)(void *ctx, const char *key, uint64_t offset, void *buf,
                     size_t cap, size_t *got, uint64_t *size, char *etag,
                     size_t etag_cap);
    /* Write len bytes as key. cond NULL: whatever is there; "*": only if
     * there is no such key; else only if the key's ETag is cond. A
     * condition that does not hold is SKIPPR_CHANGED, not logged. The new
     * ETag goes to etag (may be NULL). An unconditional write may be
     * large (a ledger run of a billion units is tens of GB, buf mapped
     * from its file, unless the sink has store_put_file): the store must
     * take any size. */
    int (*store_put)(void *ctx, const char *key, const void *buf, size_t len,
                     const char *cond, char *etag, size_t etag_cap);
    /* Remove key (SKIPPR_OK also when there is none). */
    int (*store_delete)(void *ctx, const char *key);
    /* Every key under prefix, in strcmp order, to cb (unit.id relative to
     * the instance's prefix, unit.size); cb returns non-zero to stop. */
    int (*store_list)(void *ctx, const char *prefix, skippr_unit_cb cb,
                      void *cb_data);

    /* Appended within ABI 2; optional (test with SKIPPR_OPS_HAS, may be
     * NULL), for sinks with SKIPPR_SINK_STORE. An unconditional
     * store_put of the len bytes of the open file fd, read with pread from
     * offset 0 (the fd stays the caller's), a part at a time, so that a
     * big ledger run is never in memory whole. Without it the engine maps
     * the file and calls store_put, and the mapped pages count in the
     * process's RSS while the run is sent. */
    int (*store_put_file)(void *ctx, const char *key, int fd, uint64_t len,
                          char *etag, size_t etag_cap);

    /* Appended within ABI 2; optional (test with SKIPPR_OPS_HAS, may be
     * NULL). The preflight, as for sources: check that the sink can be
     * written where the options point, for example by writing a small
     * probe object under the prefix and removing it (nothing may stay),
     * with the same error contract. */
    int (*probe)(void *ctx);

    /* Appended within ABI 2; optional (test with SKIPPR_OPS_HAS, may be
     * NULL). How `skipprd verify` reads the sink's objects back: through
     * this plugin's source, made from the sink's own options (those the
     * source also has), whose listing gives each object's key or path
     * with the sink's prefix in front. readback_prefix names the option,
     * in both tables, that holds that prefix (objects are PREFIX/KEY, or
     * KEY when it is empty). NULL: the sink cannot be read back. */
    const char *readback_prefix;
} skippr_sink_ops;

/* The smallest staging piece the engine asks stage_copy() to make a part
 * of: S3's smallest part but the last. */
#define SKIPPR_COPY_MIN_BYTES ((uint64_t)5 << 20)

/* skippr_sink_ops.flags: the sink sends records, not files (Kafka, MQTT,
 * HTTP). object_write() then gets exactly one record per call, without the
 * newline, and size/crc32c in the info still describe the whole object
 * (records each followed by a newline) for checks. */
#define SKIPPR_SINK_RECORDS 1u
/* skippr_sink_ops.flags: the sink has the grow_* calls. */
#define SKIPPR_SINK_GROWS 2u
/* skippr_sink_ops.flags: with SKIPPR_SINK_GROWS, objects grow by parts
 * (grow_part_bytes, grow_note). */
#define SKIPPR_SINK_PARTS 4u
/* skippr_sink_ops.flags: with SKIPPR_SINK_PARTS, the sink keeps staging
 * pieces (stage_put, stage_get, stage_clear). */
#define SKIPPR_SINK_STAGES 8u
/* skippr_sink_ops.flags: the sink can hold the engine's state (store_*). */
#define SKIPPR_SINK_STORE 16u

/* Non-zero when an ops struct of type `type` at `ops` has `field`. */
#define SKIPPR_OPS_HAS(type, ops, field)                                   \
    ((ops)->struct_size >= offsetof(type, field) + sizeof((ops)->field))

/* ------------------------------------------------------------------------ */
/* The descriptor                                                           */
/* ------------------------------------------------------------------------ */

/* A URL a plugin answers to on the command line (skipprd --source URL,
 * --sink URL): SCHEME://AUTHORITY/PATH, whose parts become options of the
 * endpoint. A table of them ends with a NULL scheme. Options named here
 * must be in the plugin's table. A part given to no option is refused
 * when present. */
typedef struct skippr_url_form {
    const char *scheme;      /* "s3", "kafka", "mqtts" (no "://") */
    uint32_t roles;          /* SKIPPR_URL_SOURCE and/or SKIPPR_URL_SINK */
    uint32_t flags;          /* SKIPPR_URL_* below */
    const char *url_option;  /* takes the whole URL as given, or NULL */
    const char *host_option; /* takes AUTHORITY, or NULL */
    const char *path_option; /* takes PATH (after AUTHORITY and '/') */
    const char *rest_option; /* takes all after "SCHEME://" (a path made
                              * absolute when the option is an FS_PATH) */
    const char *usage;       /* for errors: "kafka://HOST:PORT/TOPIC" */
} skippr_url_form;

#define SKIPPR_URL_SOURCE 1u
#define SKIPPR_URL_SINK 2u
/* flags: the AUTHORITY's option gets "SCHEME://AUTHORITY" (a broker
 * option that tells TLS by its scheme). */
#define SKIPPR_URL_HOST_SCHEME 1u
/* flags: a URL without AUTHORITY, or without a PATH after it, is refused
 * (an AUTHORITY is always required when host_option is set). */
#define SKIPPR_URL_PATH_REQUIRED 2u

typedef struct skippr_plugin {
    uint32_t abi_version; /* SKIPPR_ABI_VERSION; read first */
    uint32_t struct_size; /* sizeof(skippr_plugin); read second */
    const char *name;     /* YAML key, e.g. "File", "S3"; unique */
    const char *description;
    const char *version;  /* the plugin's own version string */
    const skippr_source_ops *source; /* NULL if not a source */
    const skippr_sink_ops *sink;     /* NULL if not a sink */
    /* Appended within ABI 2 (test with SKIPPR_OPS_HAS): the URLs the
     * plugin answers to on the command line, or NULL. */
    const skippr_url_form *urls;
} skippr_plugin;

#define SKIPPR_PLUGIN_ENTRY_SYMBOL "skippr_plugin_entry"
typedef const skippr_plugin *(*skippr_plugin_entry_fn)(void);

/* Defines the exported entry point for a static descriptor. */
#define SKIPPR_PLUGIN_DEFINE(descriptor)                                       \
    SKIPPR_EXPORT const skippr_plugin *skippr_plugin_entry(void)               \
    {                                                                          \
        return &(descriptor);                                                  \
    }

#ifdef __cplusplus
}
#endif

#endif
