/* skippr public ABI: versions.
 *
 * SKIPPR_ABI_VERSION is what a plugin was compiled against; the loader refuses
 * a plugin whose ABI version differs from its own before it reads any other
 * field of the descriptor. The release version is informational only.
 */
#ifndef SKIPPR_VERSION_H
#define SKIPPR_VERSION_H

#define SKIPPR_VERSION_MAJOR 0
#define SKIPPR_VERSION_MINOR 2
#define SKIPPR_VERSION_PATCH 0
#define SKIPPR_VERSION_STRING "0.2.0"

/* Bumped on any change that an already-built plugin could misread. Appending
 * a callback at the end of an ops struct is not such a change: struct_size
 * tells the host whether the plugin knows the new member. */
#define SKIPPR_ABI_VERSION 2u

#endif
