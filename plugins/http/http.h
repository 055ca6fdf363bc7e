/* The HTTP plugin: a push source (libmicrohttpd) and a sink (libcurl). */
#ifndef SKIPPR_HTTP_H
#define SKIPPR_HTTP_H

#include <skippr/plugin.h>

#define HLOG(host, level, ...) (host)->log((host), (level), __VA_ARGS__)

extern const skippr_source_ops http_push_ops;
extern const skippr_sink_ops http_sink_ops;

#endif
