/* What the layers above may read of the state, and the few settings they
 * make (state.h, "Reading the state"): the struct stays the state
 * layer's, so a field can change without a caller knowing.
 *
 * Owns: nothing (views into the state). Thread: the pipeline thread.
 */
#include "state/state.h"
#include "state/state_impl.h"

const char *sk_state_dir(const sk_state *st)
{
    return st->dir;
}

const char *sk_state_id(const sk_state *st)
{
    return st->state_id;
}

sk_ledger *sk_state_ledger(const sk_state *st)
{
    return st->ledger;
}

sk_wal *sk_state_wal(const sk_state *st)
{
    return st->wal;
}

size_t sk_state_nlive(const sk_state *st)
{
    return st->nlive;
}

sk_slice *sk_state_slice_at(const sk_state *st, size_t i)
{
    return st->live[i];
}

size_t sk_state_norphans(const sk_state *st)
{
    return st->norphans;
}

sk_slice *sk_state_orphan_at(const sk_state *st, size_t i)
{
    return st->orphans[i];
}

int sk_state_made_slices(const sk_state *st)
{
    return st->next_slice_id > 1;
}

uint64_t sk_state_block_memory(const sk_state *st)
{
    return st->open_block_cap;
}

void sk_state_tune(sk_state *st, int zstd_level, uint64_t memory_budget)
{
    st->zstd_level = zstd_level;
    st->pool.limit = memory_budget;
}

void sk_state_release_idle(sk_state *st)
{
    sk_bufpool_clear(&st->pool);
}

void sk_state_set_grow(sk_state *st, const sk_grow_config *g)
{
    st->grow = *g;
}

uint64_t sk_state_part_bytes(const sk_state *st)
{
    return st->grow.part_bytes;
}

int sk_state_stages(const sk_state *st)
{
    return st->grow.stages;
}

uint64_t sk_state_next_stage_tag(sk_state *st)
{
    return st->stage_tag++;
}
