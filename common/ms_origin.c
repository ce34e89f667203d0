/* ms_origin.c — origin and Host lists of the HTTP API (see ms_origin.h). */
#include "ms_origin.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define NAME_MAX_LEN 255 /* a DNS name; longer Host values are refused */

/* The next entry of a list: [*p, *p + *n), separators ',' and white space. */
static bool next_entry(const char **p, const char **s, size_t *n) {
    const char *q = *p;
    while (*q == ',' || *q == ' ' || *q == '\t') q++;
    if (!*q) return false;
    *s = q;
    while (*q && *q != ',' && *q != ' ' && *q != '\t') q++;
    *n = (size_t)(q - *s);
    *p = q;
    return true;
}

static bool word_is(const char *s, size_t n, const char *w) { return n == strlen(w) && !strncasecmp(s, w, n); }

static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

/* An IP literal (v6 with or without brackets) of s[0..n) → family and bytes; 0 if none. */
static int ip_literal(const char *s, size_t n, unsigned char addr[16]) {
    char buf[64];
    if (n >= 2 && s[0] == '[' && s[n - 1] == ']') s++, n -= 2;
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, s, n);
    buf[n] = 0;
    if (inet_pton(AF_INET, buf, addr) == 1) return AF_INET;
    if (inet_pton(AF_INET6, buf, addr) == 1) return AF_INET6;
    return 0;
}

static bool ip_is_loopback(int fam, const unsigned char *a) {
    static const unsigned char v6_lo[16] = {[15] = 1};
    return fam == AF_INET ? a[0] == 127 : fam == AF_INET6 && !memcmp(a, v6_lo, 16);
}

static bool name_is_loopback(const char *s, size_t n) {
    unsigned char a[16];
    int fam = ip_literal(s, n, a);
    if (fam) return ip_is_loopback(fam, a);
    return word_is(s, n, "localhost") || (n > 10 && !strncasecmp(s + n - 10, ".localhost", 10));
}

/* A host of a list entry or header: a name of name_char, or an IP literal. */
static bool host_ok(const char *s, size_t n) {
    unsigned char a[16];
    if (n == 0 || n > NAME_MAX_LEN) return false;
    if (ip_literal(s, n, a)) return true;
    for (size_t i = 0; i < n; i++)
        if (!name_char(s[i])) return false;
    return true;
}

static bool port_ok(const char *s, size_t n) {
    if (n == 0 || n > 5) return false;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    return v >= 1 && v <= 65535;
}

/* "scheme://host[:port]" split; port_n 0 when absent. The host keeps its
 * brackets. False when the shape is wrong (ports are not checked here). */
typedef struct {
    const char *scheme, *host, *port;
    size_t scheme_n, host_n, port_n;
} origin_parts;

static bool origin_split(const char *s, size_t n, origin_parts *o) {
    const char *sep = NULL;
    for (size_t i = 0; i + 3 <= n; i++)
        if (!strncmp(s + i, "://", 3)) {
            sep = s + i;
            break;
        }
    if (!sep || sep == s) return false;
    o->scheme = s;
    o->scheme_n = (size_t)(sep - s);
    for (size_t i = 0; i < o->scheme_n; i++) {
        char c = s[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (!(alpha || (i > 0 && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.')))) return false;
    }
    const char *h = sep + 3, *end = s + n, *hend;
    if (h < end && *h == '[') {
        hend = memchr(h, ']', (size_t)(end - h));
        if (!hend) return false;
        hend++;
    } else {
        hend = h;
        while (hend < end && *hend != ':') hend++;
    }
    o->host = h;
    o->host_n = (size_t)(hend - h);
    o->port = NULL;
    o->port_n = 0;
    if (hend < end) {
        if (*hend != ':') return false;
        o->port = hend + 1;
        o->port_n = (size_t)(end - hend - 1);
        if (o->port_n == 0) return false;
    }
    return host_ok(o->host, o->host_n);
}

static bool too_long(const char *list, char *why, size_t cap) {
    if (strlen(list) < MS_ORIGIN_LIST_MAX) return false;
    snprintf(why, cap, "longer than %d bytes", MS_ORIGIN_LIST_MAX - 1);
    return true;
}

ms_status ms_origin_list_check(const char *list, char *why, size_t cap) {
    if (too_long(list, why, cap)) return MS_ERR_INVALID;
    const char *p = list, *s;
    size_t n;
    int count = 0;
    bool none = false;
    while (next_entry(&p, &s, &n)) {
        count++;
        if (word_is(s, n, "none")) {
            none = true;
            continue;
        }
        if (word_is(s, n, "*") || word_is(s, n, "localhost")) continue;
        origin_parts o;
        if (!origin_split(s, n, &o) || (o.port_n && !word_is(o.port, o.port_n, "*") && !port_ok(o.port, o.port_n))) {
            snprintf(why, cap,
                     "\"%.*s\" is not an origin: expected SCHEME://HOST[:PORT|:*] (e.g. https://app.example.com), "
                     "localhost, * or none",
                     (int)(n < 80 ? n : 80), s);
            return MS_ERR_INVALID;
        }
    }
    if (none && count > 1) {
        snprintf(why, cap, "\"none\" must stand alone");
        return MS_ERR_INVALID;
    }
    return MS_OK;
}

ms_status ms_origin_hosts_check(const char *list, char *why, size_t cap) {
    if (too_long(list, why, cap)) return MS_ERR_INVALID;
    const char *p = list, *s;
    size_t n;
    while (next_entry(&p, &s, &n)) {
        if (word_is(s, n, "*")) continue;
        const char *h = s;
        size_t hn = n;
        if (hn > 2 && !strncmp(h, "*.", 2)) h += 2, hn -= 2;
        if (!host_ok(h, hn)) {
            snprintf(why, cap, "\"%.*s\" is not a host name or IP literal (a port is not part of it)",
                     (int)(n < 80 ? n : 80), s);
            return MS_ERR_INVALID;
        }
    }
    return MS_OK;
}

bool ms_origin_allowed(const char *list, const char *origin, size_t n, bool *any) {
    *any = false;
    origin_parts o;
    if (!list || !origin || !origin_split(origin, n, &o)) return false; /* "null" and anything odd */
    if (o.port_n && !port_ok(o.port, o.port_n)) return false;
    const char *p = list, *s;
    size_t k;
    while (next_entry(&p, &s, &k)) {
        if (word_is(s, k, "*")) {
            *any = true;
            return true;
        }
        if (word_is(s, k, "localhost")) {
            bool web = word_is(o.scheme, o.scheme_n, "http") || word_is(o.scheme, o.scheme_n, "https");
            if (web && name_is_loopback(o.host, o.host_n)) return true;
            continue;
        }
        origin_parts e;
        if (!origin_split(s, k, &e)) continue;
        if (e.scheme_n != o.scheme_n || strncasecmp(e.scheme, o.scheme, e.scheme_n)) continue;
        if (e.host_n != o.host_n || strncasecmp(e.host, o.host, e.host_n)) continue;
        if (e.port_n == 1 && e.port[0] == '*') return true;
        if (e.port_n == o.port_n && (e.port_n == 0 || !strncmp(e.port, o.port, e.port_n))) return true;
    }
    return false;
}

bool ms_origin_host_allowed(const char *hosts, const char *listen, const char *self, const char *host) {
    if (!host) return false;
    size_t n = strlen(host);
    const char *name = host, *end = host + n;
    size_t name_n;
    if (n > 0 && host[0] == '[') {
        const char *rb = memchr(host, ']', n);
        if (!rb) return false;
        name_n = (size_t)(rb + 1 - host);
        end = rb + 1;
    } else {
        const char *colon = memchr(host, ':', n);
        name_n = colon ? (size_t)(colon - host) : n;
        end = host + name_n;
    }
    if (*end && (*end != ':' || !port_ok(end + 1, strlen(end + 1)))) return false;
    if (name_n > 1 && name[name_n - 1] == '.') name_n--; /* "localhost." is localhost */
    if (!host_ok(name, name_n)) return false;
    const char *p = hosts ? hosts : "", *s;
    size_t k;
    while (next_entry(&p, &s, &k))
        if (word_is(s, k, "*")) return true;
    if (name_is_loopback(name, name_n)) return true;
    unsigned char a[16], b[16];
    int fam = ip_literal(name, name_n, a);
    if (fam && listen && listen[0]) {
        int lf = ip_literal(listen, strlen(listen), b);
        static const unsigned char zero[16];
        if (lf && !memcmp(b, zero, lf == AF_INET ? 4 : 16)) return true; /* 0.0.0.0 / :: */
        if (lf == fam && !memcmp(a, b, fam == AF_INET ? 4 : 16)) return true;
    }
    if (self && self[0]) {
        size_t sn = strlen(self), short_n = strcspn(self, ".");
        if ((sn == name_n || short_n == name_n) && !strncasecmp(self, name, name_n)) return true;
    }
    p = hosts ? hosts : "";
    while (next_entry(&p, &s, &k)) {
        int ef = ip_literal(s, k, b);
        if (ef) {
            if (ef == fam && !memcmp(a, b, fam == AF_INET ? 4 : 16)) return true;
            continue;
        }
        if (k > 2 && !strncmp(s, "*.", 2)) { /* *.example.com: any name under it */
            size_t suf = k - 1;               /* ".example.com" */
            if (name_n > suf && !strncasecmp(name + name_n - suf, s + 1, suf)) return true;
            continue;
        }
        if (k == name_n && !strncasecmp(s, name, k)) return true;
    }
    return false;
}
