/* Shards: which units a shard owns and the name of its state folder
 * (shard.c). The engine's calls into shard.c that take the engine are in
 * engine.h. */
#ifndef SK_PIPELINE_SHARD_H
#define SK_PIPELINE_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

/* Shards (--shard I/N). A unit belongs to shard FNV-1a-64(folder) mod N,
 * where its folder is its id up to and including the last '/' (the whole
 * id when it has none): every unit of a folder goes to one shard, so a
 * shard lists past the folders of others. Stable across versions. */
uint32_t sk_shard_of(const char *id, uint32_t count);
/* Length of id's folder as above. */
size_t sk_shard_folder_len(const char *id);
/* The name of the pipeline's state folder: NAME, or NAME.shard-I-of-N.
 * Written into buf (n bytes); returns buf. */
const char *sk_pipeline_state_name(const sk_pipeline_cfg *cfg, char *buf,
                                   size_t n);

#endif
