/* A unit's record, read and moved: see unitrec.h. Owns: nothing. */
#include "state/unitrec_impl.h"

#include "base/common.h"

const char *sk_unit_id(const sk_unit_rec *u)
{
    return u->id;
}

const char *sk_unit_version(const sk_unit_rec *u)
{
    return u->version;
}

int64_t sk_unit_size(const sk_unit_rec *u)
{
    return u->size;
}

int64_t sk_unit_offset(const sk_unit_rec *u)
{
    return u->offset;
}

uint32_t sk_unit_flags(const sk_unit_rec *u)
{
    return u->flags;
}

void sk_unit_progress(sk_unit_rec *u, int64_t offset, uint32_t set,
                      uint32_t clear)
{
    u->offset = offset;
    u->flags = (u->flags & ~clear) | set;
    u->dirty = 1;
}

sk_unit_rec *sk_unit_new(void)
{
    return sk_calloc(1, sizeof(sk_unit_rec));
}

void sk_unit_free(sk_unit_rec *u)
{
    sk_free(u);
}

void sk_unit_set(sk_unit_rec *u, int64_t offset, uint32_t flags)
{
    u->offset = offset;
    u->flags = flags;
}
