/* What defines a copy: the text two runs of one pipeline share however
 * they are started, and two different copies do not.
 *
 *   source:Plugin;key=value;...    the source's plugin and location
 *   sink:Plugin;key=value;...      the sink's (SK_ID_SINK)
 *   transform:key=value            each transform: key (SK_ID_TRANSFORM)
 *                                  but batch_partition_name(ing), which
 *                                  the state's definition holds as the
 *                                  folders they give
 *
 * The location is every option that says where data is or what shape it
 * takes (path, prefix, s3_bucket, s3_prefix, topic, brokers, broker, url,
 * urls, format), each list sorted; a path made absolute (a relative one
 * against the config file's folder) with its symlinks resolved as far as
 * it exists, so a folder a sink makes on its first run
 * names the same copy before and after. Options that only tune a run
 * (threads, part sizes, credentials, endpoints) are left out.
 *
 * Used for the state folder of a pipeline given by flags (cli/) and for
 * the claim a state makes on its sink (pipeline/claim.c). */
#ifndef SK_IDENTITY_H
#define SK_IDENTITY_H

#include <stdint.h>

#include "config/config.h"

enum { SK_ID_SOURCE = 1, SK_ID_SINK = 2, SK_ID_TRANSFORM = 4 };

/* The text of the parts `parts` (SK_ID_* bits) of pipeline cfg (from
 * doc), NUL-terminated: the caller frees it (sk_free). NULL when out of
 * memory. */
char *sk_identity_text(const sk_yaml_doc *doc, const sk_pipeline_cfg *cfg,
                       unsigned parts);

/* sk_hash64 of that text; 0 when out of memory. */
uint64_t sk_identity_hash(const sk_yaml_doc *doc, const sk_pipeline_cfg *cfg,
                          unsigned parts);

#endif
