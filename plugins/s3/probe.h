/* probe.c: the preflight's reach of the bucket (plugin.h's probe()). */
#ifndef SK_S3_PROBE_H
#define SK_S3_PROBE_H

int src_probe(void *ctx);
int sink_probe(void *ctx);

#endif
