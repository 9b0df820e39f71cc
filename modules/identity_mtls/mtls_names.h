/* identity_mtls: the names a verified client certificate carries, as the
 * transport describes them (mcpg_tls_info): the subject's common name from
 * its RFC 2253 one-line form, and the subjectAltName of a type from the
 * "TYPE:value" JSON array. Pure functions, no host.
 *
 * A name is taken only when it is the one name of its kind: a certificate
 * whose subject holds two CNs, or two SANs of the type asked for, names two
 * principals, and which of them a parser picks is an accident of its order
 * (the issuer's, or the requester's). Such a certificate, or one whose name
 * cannot be read as one clean string (a NUL or another control character, a
 * value with no text form), is refused rather than skipped: skipping would
 * let the next source decide on a certificate that already names someone. */
#ifndef MTLS_NAMES_H
#define MTLS_NAMES_H

#include <stddef.h>

/* Longest principal taken from a certificate, in bytes. */
#define MTLS_NAME_MAX 1024

/* What a source finds in a certificate. */
typedef enum mtls_found {
    MTLS_MALFORMED = -2, /* one name, unusable (see above), or text the parser cannot read */
    MTLS_AMBIGUOUS = -1, /* more than one name of the kind */
    MTLS_NONE = 0,       /* no name of the kind: the next source may be tried */
    MTLS_FOUND = 1       /* exactly one usable name, in dst */
} mtls_found;

/* The CN of an RFC 2253 name ("CN=alice,O=Acme"), unescaped (\, \+ \" \\ \<
 * \> \; \= \# \<space> and \XX hex pairs; a "quoted" value too) into dst (cap
 * bytes, NUL-terminated). Every RDN is read, multi-valued ones too
 * ("UID=7+CN=carol"): MTLS_AMBIGUOUS when the CN (or 2.5.4.3) type occurs
 * more than once; MTLS_MALFORMED when the one CN is hex-encoded BER (#...),
 * empty, longer than cap - 1 or holds a control character, or the text does
 * not parse; dst is "" unless MTLS_FOUND. */
mtls_found mtls_subject_cn(const char *subject, char *dst, size_t cap);

/* The value of the entry of sans_json (a JSON array of strings such as
 * "URI:spiffe://t/x", "DNS:a.example", "email:a@b.example") whose type is
 * `type` (compared without case), into dst. MTLS_AMBIGUOUS when more than
 * one entry has that type; MTLS_MALFORMED when the one entry is empty,
 * longer than cap - 1, or holds a byte outside printable ASCII (these are
 * IA5String names: a control character, a space or a replaced invalid byte
 * means the value is not the one the certificate holds), or the array is
 * malformed; dst is "" unless MTLS_FOUND. */
mtls_found mtls_san(const char *sans_json, const char *type, char *dst, size_t cap);

#endif
