/* ms_remote.h — a draft on the other end of the link, as an ms_draft_port.
 *
 * begin/accept send the message and return; draft waits for the matching
 * tree until the deadline. Anything else that arrives meanwhile is handled:
 * stale trees are dropped, an error from the draft fails the request's
 * speculation, and a hello (the draft restarted) is passed to the hello
 * handler and fails the current request's speculation (the new draft has
 * none of its state); the target then finishes alone. The caller holds the
 * link mutex around every call.
 */
#ifndef MS_REMOTE_H
#define MS_REMOTE_H

#include "ms_link.h"
#include "ms_msg.h"

typedef struct ms_remote ms_remote;

/* Called for each hello received (here or by the idle pump): decide and
 * answer with ms_link_accept_peer. A repeated hello of the draft already
 * accepted (same connection) does not end its speculation: it is answered
 * and the wait goes on. */
typedef void (*ms_remote_hello_fn)(void *ctx, const ms_wire_hello *h);

ms_status ms_remote_new(ms_link *link, int deadline_ms, bool wants_features, ms_remote_hello_fn on_hello,
                        void *hello_ctx, ms_remote **out);
void ms_remote_free(ms_remote **r);
ms_draft_port ms_remote_port(ms_remote *r);


#endif
