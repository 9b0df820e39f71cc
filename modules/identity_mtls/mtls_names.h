/* identity_mtls: the names a verified client certificate carries, as the
 * transport describes them (mcpg_tls_info): the subject's common name from
 * its RFC 2253 one-line form, and the first subjectAltName of a type from
 * the "TYPE:value" JSON array. Pure functions, no host. */
#ifndef MTLS_NAMES_H
#define MTLS_NAMES_H

#include <stddef.h>

/* Longest principal taken from a certificate, in bytes. */
#define MTLS_NAME_MAX 1024

/* The first CN of an RFC 2253 name ("CN=alice,O=Acme": the most specific
 * RDN comes first), unescaped (\, \+ \" \\ \< \> \; \= \# \<space> and \XX
 * hex pairs; a "quoted" value too) into dst (cap bytes, NUL-terminated).
 * 0 when the name has no CN, its value is hex-encoded BER (#...), empty,
 * longer than cap - 1, holds a control character, or the text is malformed. */
int mtls_subject_cn(const char *subject, char *dst, size_t cap);

/* The value of the first entry of sans_json (a JSON array of strings such as
 * "URI:spiffe://t/x", "DNS:a.example", "email:a@b.example") whose type is
 * `type` (compared without case) and whose value is usable (not empty, not
 * longer than cap - 1, no control character), into dst. 0 when there is
 * none, or the array is malformed before one. */
int mtls_san(const char *sans_json, const char *type, char *dst, size_t cap);

#endif
