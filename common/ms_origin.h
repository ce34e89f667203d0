/* ms_origin.h — which browser origins and which Host names the HTTP API
 * answers (issue 35.7): the lists of http.allowed_origins and
 * http.allowed_hosts, their syntax (checked by the config loader, which names
 * the key) and their matching (done by the target's HTTP layer per request).
 *
 * Why both. A page on another site that a browser on this machine opens can
 * send requests to a loopback API: cross-origin ones carry an `Origin`
 * header, which the server refuses unless the origin is allowed (so a
 * refused page neither reads an answer nor starts a generation). A DNS
 * rebinding page (evil.example resolving to 127.0.0.1) makes its requests
 * same-origin, with `Host: evil.example`: the server answers only the Host
 * names it is reached by — loopback, its listen address, its own host name,
 * and the configured extra names. An IP literal cannot be rebound.
 *
 * Origin list (comma- or space-separated; case-insensitive):
 *   localhost              http(s)://localhost, 127.0.0.1 (any 127.x) and [::1], any port (the default)
 *   SCHEME://HOST          that origin on the scheme's default port only (no ":port" in the Origin)
 *   SCHEME://HOST:PORT     that origin
 *   SCHEME://HOST:*        that host on any port
 *   *                      every origin (answered with Access-Control-Allow-Origin: *)
 *   none (alone), or ""    no browser origin at all
 * Host list: names or IP literals (IPv6 with or without brackets), "*.SUFFIX"
 * for every name under SUFFIX, or "*" (no Host check); "" adds nothing.
 */
#ifndef MS_ORIGIN_H
#define MS_ORIGIN_H

#include <stddef.h>

#include "ms_common.h"

#define MS_ORIGIN_LIST_MAX 1024 /* bytes of either list */

/* Syntax of an origin list / a host list. MS_ERR_INVALID with the problem
 * (naming the entry) in why. */
ms_status ms_origin_list_check(const char *list, char *why, size_t cap);
ms_status ms_origin_hosts_check(const char *list, char *why, size_t cap);

/* Is the Origin header value (n bytes, not NUL-terminated) allowed by list?
 * *any: the list allows every origin (answer "*"). */
bool ms_origin_allowed(const char *list, const char *origin, size_t n, bool *any);

/* Is the Host header value allowed? listen: the bound address literal ("" or
 * NULL: loopback); self: this machine's host name ("" or NULL: none). With an
 * unspecified listen address (0.0.0.0, ::) every IP literal is allowed (each
 * interface's address is one). */
bool ms_origin_host_allowed(const char *hosts, const char *listen, const char *self, const char *host);

#endif
