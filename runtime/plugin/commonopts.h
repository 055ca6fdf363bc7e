/* The options the engine reads on every source and sink (commonopts.c). */
#ifndef SK_PLUGIN_COMMONOPTS_H
#define SK_PLUGIN_COMMONOPTS_H

#include <skippr/plugin.h>

/* Options the engine reads on every source / sink; name == NULL ends. */
extern const skippr_option sk_common_source_options[];
extern const skippr_option sk_common_sink_options[];
/* Whether common option name means something for p's source or sink
 * (csv_* and xml_* only for sources that can give CSV or XML). */
int sk_common_option_applies(const skippr_plugin *p, int is_sink,
                             const char *name);

#endif
