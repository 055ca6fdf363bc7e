/* skippr public ABI: status codes.
 *
 * Every function in the plugin ABI returns one of these. Zero is success and
 * every failure is negative. The table is the single source of truth: the enum,
 * skippr_status_name() and skippr_status_str() are generated from it, so a new
 * code is added in one place. Codes are only ever appended; a value never
 * changes meaning once released.
 *
 * Sinks answer with three verdicts the engine acts on: SKIPPR_OK,
 * SKIPPR_RETRY (transient, the engine retries with backoff and jitter) and
 * SKIPPR_FATAL (permanent, the run stops with the plugin's logged message).
 * The other codes describe local failures precisely, in the way SQLite's
 * extended I/O codes name the syscall that failed.
 */
#ifndef SKIPPR_STATUS_H
#define SKIPPR_STATUS_H

#define SKIPPR_STATUS_MAP(X)                                                   \
    X(OK, 0, "success")                                                        \
    X(RETRY, -1, "transient failure, retry later")                             \
    X(FATAL, -2, "permanent failure")                                          \
    X(INVAL, -3, "invalid argument or configuration")                          \
    X(NOMEM, -4, "out of memory")                                              \
    X(IO, -5, "I/O error")                                                     \
    X(NOSPC, -6, "no space left on device")                                    \
    X(IO_FSYNC, -7, "fsync failed")                                            \
    X(IO_WRITE, -8, "write failed")                                            \
    X(IO_RENAME, -9, "rename failed")                                          \
    X(NOENT, -10, "not found")                                                 \
    X(CORRUPT, -11, "corrupt data")                                            \
    X(LOCKED, -12, "locked by another process")                                \
    X(CHANGED, -13, "changed since it was last seen")                          \
    X(ABI, -14, "plugin ABI mismatch")                                         \
    X(RANGE, -15, "value out of range or over a bound")                        \
    X(STOPPED, -16, "stopped on request")                                      \
    X(END, -17, "nothing more to read in this run")

typedef enum skippr_status {
#define SKIPPR_STATUS_ENUM_(name, value, text) SKIPPR_##name = value,
    SKIPPR_STATUS_MAP(SKIPPR_STATUS_ENUM_)
#undef SKIPPR_STATUS_ENUM_
} skippr_status;

/* Short symbolic name ("IO_FSYNC") of a status; "UNKNOWN" for other values.
 * Returns a static string: never free it. */
static inline const char *skippr_status_name(int status)
{
    switch (status) {
#define SKIPPR_STATUS_NAME_(name, value, text)                                 \
    case value:                                                                \
        return #name;
        SKIPPR_STATUS_MAP(SKIPPR_STATUS_NAME_)
#undef SKIPPR_STATUS_NAME_
    default:
        return "UNKNOWN";
    }
}

/* Human description of a status. Returns a static string: never free it. */
static inline const char *skippr_status_str(int status)
{
    switch (status) {
#define SKIPPR_STATUS_STR_(name, value, text)                                  \
    case value:                                                                \
        return text;
        SKIPPR_STATUS_MAP(SKIPPR_STATUS_STR_)
#undef SKIPPR_STATUS_STR_
    default:
        return "unknown status";
    }
}

#endif
