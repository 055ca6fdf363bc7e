/* One option's value into a plugin context: see optstore.h. */
#include "plugin/optstore.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/optval.h"

int sk_option_store(const skippr_option *o, void *ctx, const char *value,
                    sk_option_keep keep, void *ud, char *why, size_t cap)
{
    uint8_t *field = (uint8_t *)ctx + o->offset;
    switch (o->type) {
    case SKIPPR_OPT_STRING:
    case SKIPPR_OPT_SECRET: {
        const char *s;
        if (keep(ud, value, &s))
            return SKIPPR_NOMEM;
        memcpy(field, &s, sizeof s);
        return SKIPPR_OK;
    }
    case SKIPPR_OPT_INT: {
        int64_t v;
        if (sk_parse_int_value(value, &v)) {
            snprintf(why, cap, "option %s wants an integer or a size such "
                     "as 16MiB, not '%s'", o->name, value);
            return SKIPPR_INVAL;
        }
        memcpy(field, &v, sizeof v);
        return SKIPPR_OK;
    }
    case SKIPPR_OPT_BOOL: {
        int b;
        if (sk_parse_bool(value, &b)) {
            snprintf(why, cap, "option %s wants true or false, not '%s'",
                     o->name, value);
            return SKIPPR_INVAL;
        }
        memcpy(field, &b, sizeof b);
        return SKIPPR_OK;
    }
    case SKIPPR_OPT_PREFIX:
        snprintf(why, cap, "option %s takes keys that start with it, not a "
                 "value", o->name);
        return SKIPPR_INVAL;
    }
    snprintf(why, cap, "option %s has an unknown type (%d) in the plugin's "
             "table", o->name, (int)o->type);
    return SKIPPR_INVAL;
}
