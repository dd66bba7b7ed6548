// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * proto_text.c - error reporting and the text rules of the wire (UTF-8, no control bytes).
 *
 * json-c validates UTF-8 when it parses (JSON_TOKENER_VALIDATE_UTF8), but a \u0000 escape or
 * a control character still decodes into the string; and the encoder must hold its own
 * strings to the same rule, so the check lives here once, for both directions.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto_int.h"

void proto_err_fill(struct proto_error *err, enum proto_status code, const char *field,
		    const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	err->code = code;
	snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
}

void proto_pathf(char *buf, size_t cap, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, cap, fmt, ap);
	va_end(ap);
}

bool proto_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		unsigned c = p[i];
		size_t n;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			cp = c & 0x07;
		} else {
			return false; /* continuation byte, overlong lead (c0/c1) or > f4 */
		}
		if (len - i <= n)
			return false;
		for (size_t k = 1; k <= n; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (p[i + k] & 0x3f);
		}
		/* overlong forms, surrogates, beyond Unicode */
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n + 1;
	}
	return true;
}

bool proto_text_ok(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f)
			return false;
	}
	return proto_utf8_valid(s, len);
}
