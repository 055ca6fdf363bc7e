/* Recovery (replay.c): the WAL replayed into the state's live slices and
 * the ledger. */
#ifndef SK_STATE_REPLAY_H
#define SK_STATE_REPLAY_H

#include "state/types.h"

/* Replay st's WAL into its live slices. */
int st_replay(sk_state *st);

#endif
