/* The engine's own configuration keys, declared once: the `skippr:`
 * section, a pipeline's settings and its `transform:`. Each entry gives a
 * key's type, default, bounds and documentation. sk_config_pipeline()
 * validates and applies them from this table; `skipprd plugins --json`
 * prints it, and scripts/gen_reference.py writes docs/CONFIG.md's tables
 * from it (as the plugins' option tables make docs/REFERENCE.md).
 *
 * Layer: config. Uses base/.
 */
#ifndef SK_CONFIG_OPTIONS_H
#define SK_CONFIG_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

typedef enum sk_eopt_section {
    SK_EOPT_SKIPPR,    /* skippr: */
    SK_EOPT_PIPELINE,  /* pipelines: NAME: */
    SK_EOPT_TRANSFORM  /* pipelines: NAME: transform: */
} sk_eopt_section;

typedef enum sk_eopt_type {
    SK_EOPT_INT,    /* an integer within [lo, hi] */
    SK_EOPT_SIZE,   /* bytes: 1073741824, 512MiB, 1GiB; within [lo, hi] */
    SK_EOPT_CHOICE, /* one of choices[]; its index is the value */
    SK_EOPT_STRING, /* text, checked where it is used */
    SK_EOPT_LIST,   /* a YAML list */
    SK_EOPT_REF,    /* data_sources.NAME or data_sinks.NAME */
    SK_EOPT_MAP     /* a map of its own keys (transform:) */
} sk_eopt_type;

typedef struct sk_engine_option {
    const char *name;
    sk_eopt_section section;
    sk_eopt_type type;
    const char *def;      /* the default, applied when the key is absent;
                           * NULL: none. With computed set, only what the
                           * docs say the code computes. */
    int computed;         /* the default depends on other keys or the box:
                           * an absent key leaves the field zero and the
                           * code that reads it computes it (config.c) */
    int64_t lo, hi;       /* INT, SIZE: bounds */
    const char *const *choices; /* CHOICE: NULL-terminated */
    size_t offset;        /* INT, SIZE: the int64_t in sk_pipeline_cfg;
                           * CHOICE: its int; STRING: its const char *;
                           * SIZE_MAX: read by hand (lists, references,
                           * paths made absolute) */
    int flag;             /* a flag of `skipprd sync --source URL ...` */
    const char *doc;
} sk_engine_option;

/* The table, ended by an entry whose name is NULL. */
extern const sk_engine_option sk_engine_options[];

/* The entry for key in section, or NULL. */
const sk_engine_option *sk_engine_option_find(sk_eopt_section section,
                                              const char *key);

#endif
