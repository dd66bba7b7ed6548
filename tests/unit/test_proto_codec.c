// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_proto_codec.c - the host-agent protocol codec: round trips and hostile input.
 *
 * 1. Every message type, filled with non-trivial values, is encoded, fed through the frame
 *    reader one byte at a time, decoded, and compared field by field (memcmp of structs that
 *    both start zeroed).  Encoded sizes are printed as TAP diagnostics.
 * 2. A table of hostile payloads, each with the exact status and field path it must get.
 * 3. Frame-level hostility through the reader: empty, oversize, truncated frames.
 * 4. The encoder refuses what the decoder would refuse.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto.h"

static void fill_hello_agent(struct proto_msg *m)
{
	struct proto_hello *h = &m->u.hello;

	m->type = PROTO_MSG_HELLO;
	m->id = 1;
	h->role = PROTO_ROLE_AGENT;
	h->version_min = 1;
	h->version_max = 3;
	strcpy(h->software, "memtide-agent 0.1.0");
	strcpy(h->kernel, "6.1.0-18-amd64");
	h->caps = PROTO_CAP_STATS | PROTO_CAP_PSI | PROTO_CAP_WSS | PROTO_CAP_RECLAIM_MEMCG |
		  PROTO_CAP_RECLAIM_COMPACT;
	h->page_size_bytes = 4096;
	h->nr_ram = 3;
	h->ram[0] = (struct proto_range){0x1000, 0x9f000};
	h->ram[1] = (struct proto_range){0x100000, 0x7fee0000};
	h->ram[2] = (struct proto_range){0x100000000ULL, 0x80000000ULL};
}

static void fill_all(struct proto_msg *msgs, size_t *n)
{
	struct proto_msg *m = msgs;

	memset(msgs, 0, sizeof(*msgs) * 16);
	fill_hello_agent(m++);

	m->type = PROTO_MSG_HELLO;
	m->id = 7;
	m->u.hello.role = PROTO_ROLE_HOST;
	m->u.hello.version_min = 1;
	m->u.hello.version_max = 1;
	strcpy(m->u.hello.software, "memtided 0.1.0 \xc3\xa9"); /* UTF-8 survives */
	m->u.hello.caps = PROTO_CAP_HOST_RECLAIM | PROTO_CAP_HOST_WSS;
	m++;

	m->type = PROTO_MSG_STATS;
	m->id = 2;
	m->u.stats = (struct proto_stats){
	    .mono_ms = 123456789,
	    .mem_total_bytes = 2ULL << 30,
	    .mem_free_bytes = 1ULL << 30,
	    .mem_available_bytes = 1536ULL << 20,
	    .cached_bytes = 300ULL << 20,
	    .anon_bytes = 200ULL << 20,
	    .shmem_bytes = 4096,
	    .swap_total_bytes = 1ULL << 30,
	    .swap_free_bytes = 1ULL << 29,
	    .refault_anon = 17,
	    .refault_file = 4242,
	    .pgmajfault = 99,
	    .pswpin = 5,
	    .pswpout = 6,
	    .has_psi = true,
	    .psi = {0.25, 1.5, 123456, 0.0, 0.75, 999},
	};
	m++;

	m->type = PROTO_MSG_STATS; /* without PSI */
	m->id = 3;
	m->u.stats.mem_total_bytes = 1 << 20;
	m++;

	m->type = PROTO_MSG_WSS;
	m->id = 4;
	m->u.wss.mono_ms = 5000;
	m->u.wss.gens_complete = true;
	m->u.wss.nr_gens = 3;
	m->u.wss.gens[0] = (struct proto_wss_gen){1, 0, 7, 100, 1000, 2000};
	m->u.wss.gens[1] = (struct proto_wss_gen){1, 0, 6, 5000, 30, 40};
	m->u.wss.gens[2] = (struct proto_wss_gen){2, 1, 3, 5000, 0, 1};
	m->u.wss.nr_bins = 3;
	m->u.wss.bins[0] = (struct proto_wss_bin){0, 1 << 20, 2 << 20};
	m->u.wss.bins[1] = (struct proto_wss_bin){1000, 4096, 8192};
	m->u.wss.bins[2] = (struct proto_wss_bin){60000, 0, 0};
	m++;

	m->type = PROTO_MSG_HINT;
	m->id = 5;
	m->u.hint.kind = PROTO_HINT_COLD;
	m->u.hint.pid = 321;
	m->u.hint.truncated = true;
	m->u.hint.nr_ranges = 2;
	m->u.hint.ranges[0] = (struct proto_range){0x200000, 0x1000};
	m->u.hint.ranges[1] = (struct proto_range){0x400000, 0x200000};
	m++;

	m->type = PROTO_MSG_HINT;
	m->id = 6;
	m->u.hint.kind = PROTO_HINT_NEED;
	m->u.hint.pid = 1;
	m->u.hint.need_bytes = 512ULL << 20;
	m->u.hint.within_ms = 30000;
	m++;

	m->type = PROTO_MSG_RECLAIM;
	m->id = 8;
	m->u.reclaim = (struct proto_reclaim){64ULL << 20, PROTO_SCOPE_ANY, 5000, true};
	m++;

	m->type = PROTO_MSG_RECLAIM_REPLY;
	m->id = 9;
	m->u.reclaim_reply.re = 8;
	m->u.reclaim_reply.result = PROTO_RECLAIM_FLOOR;
	m->u.reclaim_reply.requested_bytes = 64ULL << 20;
	m->u.reclaim_reply.freed_bytes = 10ULL << 20;
	m->u.reclaim_reply.mem_available_bytes = 256ULL << 20;
	m->u.reclaim_reply.floor_bytes = 256ULL << 20;
	m->u.reclaim_reply.elapsed_ms = 42;
	m->u.reclaim_reply.nr_steps = 2;
	m->u.reclaim_reply.steps[0] =
	    (struct proto_reclaim_step){PROTO_METHOD_MEMCG, 10 << 20, 40, 0};
	m->u.reclaim_reply.steps[1] = (struct proto_reclaim_step){PROTO_METHOD_COMPACT, 0, 2, 13};
	strcpy(m->u.reclaim_reply.message, "stopped at the MemAvailable floor");
	m++;

	m->type = PROTO_MSG_CONFIG;
	m->id = 10;
	m->u.config = (struct proto_config){
	    2000, 10000, PROTO_COLLECT_STATS | PROTO_COLLECT_WSS, 4, {0, 5000, 30000, 120000}};
	m++;

	m->type = PROTO_MSG_CONFIG_REPLY;
	m->id = 11;
	m->u.config_reply.re = 10;
	m->u.config_reply.config = (struct proto_config){2000, 10000, PROTO_COLLECT_STATS, 1, {0}};
	m++;

	m->type = PROTO_MSG_PING;
	m->id = 12;
	m->u.ping.mono_ms = 77;
	m++;

	m->type = PROTO_MSG_PONG;
	m->id = 13;
	m->u.pong.re = 12;
	m->u.pong.mono_ms = PROTO_INT_MAX;
	m++;

	m->type = PROTO_MSG_ERROR;
	m->id = 14;
	m->u.error.re = 3;
	m->u.error.code = PROTO_E_UNKNOWN_FIELD;
	m->u.error.fatal = false;
	strcpy(m->u.error.field, "psi.x");
	strcpy(m->u.error.message, "unknown field 'psi.x'");
	m++;

	*n = (size_t)(m - msgs);
}

static void test_round_trip(void **state)
{
	static struct proto_msg msgs[16], back;
	static uint8_t frame[PROTO_ENCODE_MAX_BYTES];
	struct proto_reader r;
	struct proto_error err;
	size_t n, len;
	unsigned seen = 0;

	(void)state;
	fill_all(msgs, &n);
	proto_reader_init(&r);
	for (size_t i = 0; i < n; i++) {
		const char *json = NULL;
		size_t jlen = 0;
		int rc = 0;

		assert_int_equal(proto_encode(&msgs[i], frame, sizeof(frame), &len, &err),
				 PROTO_OK);
		printf("# %-14s %zu bytes\n", proto_msg_type_name(msgs[i].type), len);
		/* one byte at a time: the reader must assemble the frame */
		for (size_t k = 0; k < len; k++) {
			assert_int_equal(rc, 0);
			assert_int_equal(proto_reader_feed(&r, frame + k, 1), 1);
			rc = proto_reader_next(&r, &json, &jlen, &err);
		}
		assert_int_equal(rc, 1);
		assert_int_equal(jlen, len - 4);
		assert_int_equal(proto_decode(json, jlen, &back, &err), PROTO_OK);
		assert_memory_equal(&back, &msgs[i], sizeof(back));
		seen |= 1u << msgs[i].type;
	}
	/* every message type was covered */
	for (int t = PROTO_MSG_HELLO; t < PROTO_MSG_TYPE_COUNT; t++)
		assert_true(seen & (1u << t));
	assert_int_equal(proto_reader_pending(&r), 0);
	proto_reader_free(&r);
}

/* The largest message: a hint with every range, and a wss with every gen and bin. */
static void test_largest_messages(void **state)
{
	static struct proto_msg m, back;
	static uint8_t frame[PROTO_ENCODE_MAX_BYTES];
	struct proto_error err;
	size_t len;

	(void)state;
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_HINT;
	m.id = PROTO_ID_MAX;
	m.u.hint.kind = PROTO_HINT_HOT;
	m.u.hint.pid = 1 << 22;
	m.u.hint.nr_ranges = PROTO_MAX_HINT_RANGES;
	for (uint32_t i = 0; i < PROTO_MAX_HINT_RANGES; i++)
		m.u.hint.ranges[i] =
		    (struct proto_range){(1ULL << 51) + i * (1ULL << 40), 1ULL << 39};
	assert_int_equal(proto_encode(&m, frame, sizeof(frame), &len, &err), PROTO_OK);
	printf("# hint with %d ranges: %zu bytes\n", PROTO_MAX_HINT_RANGES, len);
	assert_int_equal(proto_decode(frame + 4, len - 4, &back, &err), PROTO_OK);
	assert_memory_equal(&back, &m, sizeof(m));

	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_WSS;
	m.id = 1;
	m.u.wss.nr_gens = PROTO_MAX_GENS;
	for (uint32_t i = 0; i < PROTO_MAX_GENS; i++)
		m.u.wss.gens[i] = (struct proto_wss_gen){
		    i, i % 4, 1000 + i, 1000ULL * i, PROTO_PAGES_MAX, PROTO_PAGES_MAX};
	m.u.wss.nr_bins = PROTO_MAX_WSS_BINS;
	for (uint32_t i = 0; i < PROTO_MAX_WSS_BINS; i++)
		m.u.wss.bins[i] =
		    (struct proto_wss_bin){i * 1000ULL, PROTO_BYTES_MAX, PROTO_BYTES_MAX};
	assert_int_equal(proto_encode(&m, frame, sizeof(frame), &len, &err), PROTO_OK);
	printf("# wss with %d gens, %d bins: %zu bytes\n", PROTO_MAX_GENS, PROTO_MAX_WSS_BINS, len);
	assert_int_equal(proto_decode(frame + 4, len - 4, &back, &err), PROTO_OK);
	assert_memory_equal(&back, &m, sizeof(m));
	/* a small buffer is refused, not overrun */
	assert_int_equal(proto_encode(&m, frame, 100, &len, &err), PROTO_E_NOSPC);
}

struct hostile {
	const char *what;
	const char *json; /* NULL: use raw/raw_len */
	const char *raw;
	size_t raw_len;
	enum proto_status want;
	const char *field;
};

#define PING_ "{\"type\":\"ping\",\"id\":1,"
#define HELLO_H                                                                                    \
	"{\"type\":\"hello\",\"id\":1,\"role\":\"host\",\"version_min\":1,\"version_max\":1,"
#define HELLO_A                                                                                    \
	"{\"type\":\"hello\",\"id\":1,\"role\":\"agent\",\"version_min\":1,\"version_max\":1,"     \
	"\"software\":\"a\",\"caps\":[],\"kernel\":\"6.1\","
#define STATS_                                                                                     \
	"{\"type\":\"stats\",\"id\":1,\"mono_ms\":1,\"mem_total_bytes\":100,"                      \
	"\"mem_free_bytes\":10,\"mem_available_bytes\":50,\"cached_bytes\":0,\"anon_bytes\":0,"    \
	"\"shmem_bytes\":0,\"swap_total_bytes\":0,\"swap_free_bytes\":0,\"refault_anon\":0,"       \
	"\"refault_file\":0,\"pgmajfault\":0,\"pswpin\":0,\"pswpout\":0"
#define PSI_(x)                                                                                    \
	STATS_ ",\"psi\":{\"some_avg10\":" x ",\"some_avg60\":0,\"some_total_us\":0,"              \
	       "\"full_avg10\":0,\"full_avg60\":0,\"full_total_us\":0}}"
#define HINT_ "{\"type\":\"hint\",\"id\":1,\"pid\":5,"
#define RECL_ "{\"type\":\"reclaim\",\"id\":1,"
#define CONF_ "{\"type\":\"config\",\"id\":1,\"wss_interval_ms\":1000,"
#define RR_                                                                                        \
	"{\"type\":\"reclaim_reply\",\"id\":2,\"re\":1,\"result\":\"done\",\"requested_bytes\":1," \
	"\"freed_bytes\":1,\"mem_available_bytes\":1,\"floor_bytes\":0,\"elapsed_ms\":1,"          \
	"\"message\":\"\","
#define WSS_ "{\"type\":\"wss\",\"id\":1,\"mono_ms\":1,\"gens_complete\":true,"

static const struct hostile hostile[] = {
    {"empty payload", "", NULL, 0, PROTO_E_JSON, ""},
    {"lone brace", "{", NULL, 0, PROTO_E_JSON, ""},
    {"truncated object", PING_ "\"mono_ms\":5", NULL, 0, PROTO_E_JSON, ""},
    {"whitespace only", "   ", NULL, 0, PROTO_E_JSON, ""},
    {"array payload", "[1,2]", NULL, 0, PROTO_E_NOT_OBJECT, ""},
    {"number payload", "42", NULL, 0, PROTO_E_NOT_OBJECT, ""},
    {"string payload", "\"ping\"", NULL, 0, PROTO_E_NOT_OBJECT, ""},
    {"null payload", "null", NULL, 0, PROTO_E_NOT_OBJECT, ""},
    {"single quotes", "{'type':'ping','id':1,'mono_ms':1}", NULL, 0, PROTO_E_JSON, ""},
    {"trailing garbage", PING_ "\"mono_ms\":1} x", NULL, 0, PROTO_E_JSON, ""},
    {"two objects", PING_ "\"mono_ms\":1}{}", NULL, 0, PROTO_E_JSON, ""},
    {"trailing comma", PING_ "\"mono_ms\":1,}", NULL, 0, PROTO_E_JSON, ""},
    {"NUL byte", NULL, "{\"type\":\"ping\",\0\"id\":1}", 21, PROTO_E_JSON, ""},
    {"invalid UTF-8", HELLO_H "\"software\":\"\xff\",\"caps\":[]}", NULL, 0, PROTO_E_UTF8, ""},
    {"overlong UTF-8", HELLO_H "\"software\":\"\xc0\xaf\",\"caps\":[]}", NULL, 0, PROTO_E_UTF8, ""},
    {"invalid UTF-8 in key", PING_ "\"mono_ms\":1,\"\xfe\":1}", NULL, 0, PROTO_E_UTF8, ""},
    {"nesting 5 deep", PING_ "\"mono_ms\":[[[[1]]]]}", NULL, 0, PROTO_E_DEPTH, ""},
    {"nesting 10000 deep", NULL, NULL, 0, PROTO_E_DEPTH, ""}, /* built at run time */
    {"duplicate key", PING_ "\"mono_ms\":1,\"mono_ms\":2}", NULL, 0, PROTO_E_DUPLICATE_KEY, ""},
    {"duplicate id", "{\"type\":\"ping\",\"id\":1,\"id\":2,\"mono_ms\":1}", NULL, 0,
     PROTO_E_DUPLICATE_KEY, ""},
    {"duplicate key nested",
     HINT_ "\"kind\":\"hot\",\"truncated\":false,\"ranges\":[{\"start\":0,\"bytes\":4096},"
	   "{\"start\":8192,\"bytes\":4096,\"bytes\":4096}]}",
     NULL, 0, PROTO_E_DUPLICATE_KEY, "ranges[1]"},
    {"missing type", "{\"id\":1,\"mono_ms\":1}", NULL, 0, PROTO_E_MISSING_FIELD, "type"},
    {"missing id", "{\"type\":\"ping\",\"mono_ms\":1}", NULL, 0, PROTO_E_MISSING_FIELD, "id"},
    {"unknown type", "{\"type\":\"pang\",\"id\":1}", NULL, 0, PROTO_E_UNKNOWN_TYPE, "type"},
    {"type with NUL", "{\"type\":\"ping\\u0000x\",\"id\":1,\"mono_ms\":1}", NULL, 0,
     PROTO_E_UNKNOWN_TYPE, "type"},
    {"type not a string", "{\"type\":5,\"id\":1}", NULL, 0, PROTO_E_WRONG_TYPE, "type"},
    {"id zero", "{\"type\":\"ping\",\"id\":0,\"mono_ms\":1}", NULL, 0, PROTO_E_RANGE, "id"},
    {"id negative", "{\"type\":\"ping\",\"id\":-1,\"mono_ms\":1}", NULL, 0, PROTO_E_RANGE, "id"},
    {"id 2^32", "{\"type\":\"ping\",\"id\":4294967296,\"mono_ms\":1}", NULL, 0, PROTO_E_RANGE,
     "id"},
    {"id fraction", "{\"type\":\"ping\",\"id\":1.5,\"mono_ms\":1}", NULL, 0, PROTO_E_WRONG_TYPE,
     "id"},
    {"id exponent", "{\"type\":\"ping\",\"id\":1e3,\"mono_ms\":1}", NULL, 0, PROTO_E_WRONG_TYPE,
     "id"},
    {"id string", "{\"type\":\"ping\",\"id\":\"1\",\"mono_ms\":1}", NULL, 0, PROTO_E_WRONG_TYPE,
     "id"},
    {"id null", "{\"type\":\"ping\",\"id\":null,\"mono_ms\":1}", NULL, 0, PROTO_E_WRONG_TYPE, "id"},
    {"2^53 integer", PING_ "\"mono_ms\":9007199254740992}", NULL, 0, PROTO_E_RANGE, "mono_ms"},
    {"2^63 integer", PING_ "\"mono_ms\":9223372036854775808}", NULL, 0, PROTO_E_RANGE, "mono_ms"},
    {"huge integer", PING_ "\"mono_ms\":999999999999999999999999999999}", NULL, 0, PROTO_E_RANGE,
     "mono_ms"},
    {"1e400 for integer", PING_ "\"mono_ms\":1e400}", NULL, 0, PROTO_E_WRONG_TYPE, "mono_ms"},
    {"bool for integer", PING_ "\"mono_ms\":true}", NULL, 0, PROTO_E_WRONG_TYPE, "mono_ms"},
    {"unknown field", PING_ "\"mono_ms\":1,\"foo\":1}", NULL, 0, PROTO_E_UNKNOWN_FIELD, "foo"},
    {"missing field", PING_ "\"x\":1}", NULL, 0, PROTO_E_UNKNOWN_FIELD, "x"},
    {"missing mono_ms", "{\"type\":\"ping\",\"id\":1}", NULL, 0, PROTO_E_MISSING_FIELD, "mono_ms"},
    {"NaN", PSI_("NaN"), NULL, 0, PROTO_E_RANGE, "psi.some_avg10"},
    {"Infinity", PSI_("-Infinity"), NULL, 0, PROTO_E_RANGE, "psi.some_avg10"},
    {"1e999 double", PSI_("1e999"), NULL, 0, PROTO_E_RANGE, "psi.some_avg10"},
    {"psi over 100", PSI_("100.5"), NULL, 0, PROTO_E_RANGE, "psi.some_avg10"},
    {"psi negative", PSI_("-0.5"), NULL, 0, PROTO_E_RANGE, "psi.some_avg10"},
    {"psi string", PSI_("\"1\""), NULL, 0, PROTO_E_WRONG_TYPE, "psi.some_avg10"},
    {"psi not object", STATS_ ",\"psi\":[]}", NULL, 0, PROTO_E_WRONG_TYPE, "psi"},
    {"psi unknown field", STATS_ ",\"psi\":{\"zz\":1}}", NULL, 0, PROTO_E_UNKNOWN_FIELD, "psi.zz"},
    {"free above total",
     "{\"type\":\"stats\",\"id\":1,\"mono_ms\":1,\"mem_total_bytes\":100,"
     "\"mem_free_bytes\":101,\"mem_available_bytes\":50,\"cached_bytes\":0,\"anon_bytes\":0,"
     "\"shmem_bytes\":0,\"swap_total_bytes\":0,\"swap_free_bytes\":0,\"refault_anon\":0,"
     "\"refault_file\":0,\"pgmajfault\":0,\"pswpin\":0,\"pswpout\":0}",
     NULL, 0, PROTO_E_RANGE, "mem_free_bytes"},
    {"stats valid (control)", STATS_ "}", NULL, 0, PROTO_OK, ""}, /* control: valid */
    {"bad role", HELLO_H "\"software\":\"x\",\"caps\":[],\"role\":\"king\"}", NULL, 0,
     PROTO_E_DUPLICATE_KEY, ""},
    {"unknown role",
     "{\"type\":\"hello\",\"id\":1,\"role\":\"king\",\"version_min\":1,\"version_max\":1,"
     "\"software\":\"x\",\"caps\":[]}",
     NULL, 0, PROTO_E_BAD_VALUE, "role"},
    {"version_min 0",
     "{\"type\":\"hello\",\"id\":1,\"role\":\"host\",\"version_min\":0,\"version_max\":1,"
     "\"software\":\"x\",\"caps\":[]}",
     NULL, 0, PROTO_E_RANGE, "version_min"},
    {"version_max below min",
     "{\"type\":\"hello\",\"id\":1,\"role\":\"host\",\"version_min\":3,\"version_max\":2,"
     "\"software\":\"x\",\"caps\":[]}",
     NULL, 0, PROTO_E_RANGE, "version_max"},
    {"host hello with kernel", HELLO_H "\"software\":\"x\",\"caps\":[],\"kernel\":\"6.1\"}", NULL,
     0, PROTO_E_UNKNOWN_FIELD, "kernel"},
    {"software control char", HELLO_H "\"software\":\"a\\u0001b\",\"caps\":[]}", NULL, 0,
     PROTO_E_BAD_VALUE, "software"},
    {"software embedded NUL", HELLO_H "\"software\":\"a\\u0000b\",\"caps\":[]}", NULL, 0,
     PROTO_E_BAD_VALUE, "software"},
    {"software empty", HELLO_H "\"software\":\"\",\"caps\":[]}", NULL, 0, PROTO_E_RANGE,
     "software"},
    {"software too long",
     HELLO_H "\"software\":\"0123456789012345678901234567890123456789012345678901234567890123"
	     "\",\"caps\":[]}",
     NULL, 0, PROTO_E_TOO_LONG, "software"},
    {"caps element number", HELLO_H "\"software\":\"x\",\"caps\":[1]}", NULL, 0, PROTO_E_WRONG_TYPE,
     "caps[0]"},
    {"caps unknown name ignored", HELLO_H "\"software\":\"x\",\"caps\":[\"teleport\"]}", NULL, 0,
     PROTO_OK, ""},
    {"page size not power of 2", HELLO_A "\"page_size_bytes\":3000,\"ram\":[]}", NULL, 0,
     PROTO_E_BAD_VALUE, "page_size_bytes"},
    {"page size too big", HELLO_A "\"page_size_bytes\":1048576,\"ram\":[]}", NULL, 0, PROTO_E_RANGE,
     "page_size_bytes"},
    {"agent hello missing ram", HELLO_A "\"page_size_bytes\":4096}", NULL, 0, PROTO_E_MISSING_FIELD,
     "ram"},
    {"ram overlap",
     HELLO_A "\"page_size_bytes\":4096,\"ram\":[{\"start\":0,\"bytes\":8192},"
	     "{\"start\":4096,\"bytes\":4096}]}",
     NULL, 0, PROTO_E_BAD_VALUE, "ram[1].start"},
    {"ram zero bytes", HELLO_A "\"page_size_bytes\":4096,\"ram\":[{\"start\":0,\"bytes\":0}]}",
     NULL, 0, PROTO_E_RANGE, "ram[0].bytes"},
    {"ram beyond 2^52",
     HELLO_A "\"page_size_bytes\":4096,\"ram\":[{\"start\":4503599627370496,\"bytes\":1}]}", NULL,
     0, PROTO_E_RANGE, "ram[0]"},
    {"hint misaligned",
     HINT_ "\"kind\":\"cold\",\"truncated\":false,\"ranges\":[{\"start\":100,\"bytes\":4096}]}",
     NULL, 0, PROTO_E_BAD_VALUE, "ranges[0].start"},
    {"hint no ranges", HINT_ "\"kind\":\"hot\",\"truncated\":false,\"ranges\":[]}", NULL, 0,
     PROTO_E_RANGE, "ranges"},
    {"hint range not object", HINT_ "\"kind\":\"hot\",\"truncated\":false,\"ranges\":[7]}", NULL, 0,
     PROTO_E_WRONG_TYPE, "ranges[0]"},
    {"hint range extra key",
     HINT_ "\"kind\":\"hot\",\"truncated\":false,\"ranges\":[{\"start\":0,\"bytes\":4096,"
	   "\"pfn\":1}]}",
     NULL, 0, PROTO_E_UNKNOWN_FIELD, "ranges[0].pfn"},
    {"hint unknown kind", HINT_ "\"kind\":\"lukewarm\"}", NULL, 0, PROTO_E_BAD_VALUE, "kind"},
    {"hint kind too long", HINT_ "\"kind\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", NULL,
     0, PROTO_E_BAD_VALUE, "kind"},
    {"need with ranges", HINT_ "\"kind\":\"need\",\"need_bytes\":1,\"within_ms\":1,\"ranges\":[]}",
     NULL, 0, PROTO_E_UNKNOWN_FIELD, "ranges"},
    {"need zero bytes", HINT_ "\"kind\":\"need\",\"need_bytes\":0,\"within_ms\":1}", NULL, 0,
     PROTO_E_RANGE, "need_bytes"},
    {"need within too long", HINT_ "\"kind\":\"need\",\"need_bytes\":1,\"within_ms\":86400001}",
     NULL, 0, PROTO_E_RANGE, "within_ms"},
    {"pid zero",
     "{\"type\":\"hint\",\"id\":1,\"pid\":0,\"kind\":\"need\",\"need_bytes\":1,"
     "\"within_ms\":1}",
     NULL, 0, PROTO_E_RANGE, "pid"},
    {"reclaim bad scope",
     RECL_ "\"bytes\":1,\"scope\":\"all\",\"deadline_ms\":1,"
	   "\"compact\":true}",
     NULL, 0, PROTO_E_BAD_VALUE, "scope"},
    {"reclaim zero bytes",
     RECL_ "\"bytes\":0,\"scope\":\"file\",\"deadline_ms\":1,"
	   "\"compact\":true}",
     NULL, 0, PROTO_E_RANGE, "bytes"},
    {"reclaim zero deadline",
     RECL_ "\"bytes\":1,\"scope\":\"file\",\"deadline_ms\":0,"
	   "\"compact\":true}",
     NULL, 0, PROTO_E_RANGE, "deadline_ms"},
    {"reclaim compact string",
     RECL_ "\"bytes\":1,\"scope\":\"file\",\"deadline_ms\":1,"
	   "\"compact\":\"yes\"}",
     NULL, 0, PROTO_E_WRONG_TYPE, "compact"},
    {"reclaim_reply method twice",
     RR_ "\"steps\":[{\"method\":\"memcg\",\"freed_bytes\":0,\"elapsed_ms\":0,\"err\":0},"
	 "{\"method\":\"memcg\",\"freed_bytes\":0,\"elapsed_ms\":0,\"err\":0}]}",
     NULL, 0, PROTO_E_BAD_VALUE, "steps[1].method"},
    {"reclaim_reply errno range",
     RR_ "\"steps\":[{\"method\":\"mglru\",\"freed_bytes\":0,\"elapsed_ms\":0,\"err\":5000}]}",
     NULL, 0, PROTO_E_RANGE, "steps[0].err"},
    {"reclaim_reply too many steps", RR_ "\"steps\":[{},{},{},{},{}]}", NULL, 0, PROTO_E_TOO_LONG,
     "steps"},
    {"config interval too short",
     CONF_ "\"report_interval_ms\":10,\"collectors\":[],\"wss_bins_ms\":[0]}", NULL, 0,
     PROTO_E_RANGE, "report_interval_ms"},
    {"config unknown collector",
     CONF_ "\"report_interval_ms\":1000,\"collectors\":[\"cpu\"],\"wss_bins_ms\":[0]}", NULL, 0,
     PROTO_E_BAD_VALUE, "collectors[0]"},
    {"config bins not from 0",
     CONF_ "\"report_interval_ms\":1000,\"collectors\":[],\"wss_bins_ms\":[5]}", NULL, 0,
     PROTO_E_BAD_VALUE, "wss_bins_ms[0]"},
    {"config bins not ascending",
     CONF_ "\"report_interval_ms\":1000,\"collectors\":[],\"wss_bins_ms\":[0,5,5]}", NULL, 0,
     PROTO_E_BAD_VALUE, "wss_bins_ms[2]"},
    {"config bins empty", CONF_ "\"report_interval_ms\":1000,\"collectors\":[],\"wss_bins_ms\":[]}",
     NULL, 0, PROTO_E_RANGE, "wss_bins_ms"},
    {"config 17 bins",
     CONF_ "\"report_interval_ms\":1000,\"collectors\":[],"
	   "\"wss_bins_ms\":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}",
     NULL, 0, PROTO_E_TOO_LONG, "wss_bins_ms"},
    {"wss gens age descending",
     WSS_ "\"gens\":[{\"memcg_id\":1,\"node\":0,\"seq\":2,\"age_ms\":50,\"anon_pages\":0,"
	  "\"file_pages\":0},{\"memcg_id\":1,\"node\":0,\"seq\":1,\"age_ms\":10,"
	  "\"anon_pages\":0,\"file_pages\":0}],\"bins\":[{\"min_age_ms\":0,\"anon_bytes\":0,"
	  "\"file_bytes\":0}]}",
     NULL, 0, PROTO_E_RANGE, "gens[1].age_ms"},
    {"wss no bins", WSS_ "\"gens\":[],\"bins\":[]}", NULL, 0, PROTO_E_RANGE, "bins"},
    {"error unknown code",
     "{\"type\":\"error\",\"id\":1,\"re\":0,\"code\":\"oops\",\"fatal\":false,\"field\":\"\","
     "\"message\":\"\"}",
     NULL, 0, PROTO_E_BAD_VALUE, "code"},
    {"error code ok",
     "{\"type\":\"error\",\"id\":1,\"re\":0,\"code\":\"ok\",\"fatal\":false,\"field\":\"\","
     "\"message\":\"\"}",
     NULL, 0, PROTO_E_BAD_VALUE, "code"},
    {"pong re zero", "{\"type\":\"pong\",\"id\":1,\"re\":0,\"mono_ms\":1}", NULL, 0, PROTO_E_RANGE,
     "re"},
    {"too many tokens", NULL, NULL, 0, PROTO_E_TOO_LONG, ""}, /* built at run time */
};

/* Payloads too big for a literal. */
static char *build_special(const char *what, size_t *len)
{
	char *p = NULL;
	size_t n = 0;

	if (strcmp(what, "nesting 10000 deep") == 0) {
		n = 20000;
		p = malloc(n);
		assert_non_null(p);
		memset(p, '[', 10000);
		memset(p + 10000, ']', 10000);
	} else if (strcmp(what, "too many tokens") == 0) {
		const char *head = PING_ "\"mono_ms\":[";
		size_t h = strlen(head);

		n = h + 2 * 9000 + 2;
		p = malloc(n);
		assert_non_null(p);
		memcpy(p, head, h);
		for (size_t i = 0; i < 9000; i++) {
			p[h + 2 * i] = '0';
			p[h + 2 * i + 1] = ',';
		}
		p[n - 3] = '0';
		p[n - 2] = ']';
		p[n - 1] = '}';
	}
	*len = n;
	return p;
}

static void test_hostile_table(void **state)
{
	static struct proto_msg m;
	size_t n = sizeof(hostile) / sizeof(hostile[0]);
	int bad = 0;

	(void)state;
	assert_true(n >= 40);
	for (size_t i = 0; i < n; i++) {
		const struct hostile *h = &hostile[i];
		struct proto_error err;
		char *owned = NULL;
		const char *p;
		size_t len;
		enum proto_status s;

		if (h->json) {
			p = h->json;
			len = strlen(p);
		} else if (h->raw) {
			p = h->raw;
			len = h->raw_len;
		} else {
			owned = build_special(h->what, &len);
			p = owned;
		}
		s = proto_decode(p, len, &m, &err);
		if (s != h->want || (s != PROTO_OK && strcmp(err.field, h->field) != 0)) {
			printf("# MISMATCH %-28s got %s field '%s' (%s), want %s field '%s'\n",
			       h->what, proto_status_name(s), err.field, err.message,
			       proto_status_name(h->want), h->field);
			bad++;
		} else {
			printf("# %-30s -> %s %s%s\n", h->what, proto_status_name(s), err.field,
			       s ? "" : "(accepted)");
		}
		/* every error can be turned into an error reply that encodes */
		if (s != PROTO_OK) {
			struct proto_msg reply;
			uint8_t buf[1024];
			size_t flen;

			proto_error_to_msg(&err, 99, false, &reply);
			assert_int_equal(proto_encode(&reply, buf, sizeof(buf), &flen, NULL),
					 PROTO_OK);
		}
		free(owned);
	}
	printf("# %zu hostile inputs\n", n);
	assert_int_equal(bad, 0);
}

/* The error reply names the offending message's id. */
static void test_error_names_id(void **state)
{
	static struct proto_msg m;
	struct proto_error err;
	const char *j = PING_ "\"mono_ms\":1,\"evil\":1}";

	(void)state;
	assert_int_equal(proto_decode(j, strlen(j), &m, &err), PROTO_E_UNKNOWN_FIELD);
	assert_int_equal(err.re, 1);
	assert_string_equal(err.field, "evil");
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void test_reader_frames(void **state)
{
	struct proto_reader r;
	struct proto_error err;
	const char *json;
	size_t len;
	uint8_t hdr[4];

	(void)state;
	/* length 0 */
	proto_reader_init(&r);
	put_be32(hdr, 0);
	assert_int_equal(proto_reader_feed(&r, hdr, 4), 4);
	assert_int_equal(proto_reader_next(&r, &json, &len, &err), -1);
	assert_int_equal(err.code, PROTO_E_FRAME_EMPTY);
	/* broken stays broken */
	assert_int_equal(proto_reader_feed(&r, hdr, 4), 0);
	assert_int_equal(proto_reader_next(&r, &json, &len, &err), -1);
	proto_reader_reset(&r);

	/* length 2^32-1 and 1 MiB + 1: refused before any allocation for it */
	put_be32(hdr, 0xffffffffu);
	proto_reader_feed(&r, hdr, 4);
	assert_int_equal(proto_reader_next(&r, &json, &len, &err), -1);
	assert_int_equal(err.code, PROTO_E_FRAME_TOO_LARGE);
	assert_true(r.cap <= 64 * 1024);
	proto_reader_reset(&r);
	put_be32(hdr, PROTO_FRAME_MAX_BYTES + 1);
	proto_reader_feed(&r, hdr, 4);
	assert_int_equal(proto_reader_next(&r, &json, &len, &err), -1);
	assert_int_equal(err.code, PROTO_E_FRAME_TOO_LARGE);
	proto_reader_reset(&r);

	/* truncated: header says 100, 50 arrive, then EOF */
	{
		uint8_t part[54] = {0};

		put_be32(part, 100);
		memset(part + 4, ' ', 50);
		assert_int_equal(proto_reader_feed(&r, part, sizeof(part)), sizeof(part));
		assert_int_equal(proto_reader_next(&r, &json, &len, &err), 0);
		assert_int_equal(proto_reader_pending(&r), 54);
	}
	proto_reader_reset(&r);

	/* exactly 1 MiB: a ping padded with spaces is accepted and decodes */
	{
		size_t n = PROTO_FRAME_MAX_BYTES;
		uint8_t *big = malloc(n + 4);
		const char *ping = PING_ "\"mono_ms\":9}";
		static struct proto_msg m;
		size_t off = 0;

		assert_non_null(big);
		put_be32(big, (uint32_t)n);
		memset(big + 4, ' ', n);
		memcpy(big + 4, ping, strlen(ping)); // NOLINT(bugprone-not-null-terminated-result)
		while (off < n + 4) {
			long k = proto_reader_feed(&r, big + off, n + 4 - off);

			assert_true(k > 0);
			off += (size_t)k;
		}
		assert_int_equal(proto_reader_next(&r, &json, &len, &err), 1);
		assert_int_equal(len, n);
		assert_int_equal(proto_decode(json, len, &m, &err), PROTO_OK);
		assert_int_equal(m.u.ping.mono_ms, 9);
		assert_true(r.cap <= PROTO_FRAME_MAX_BYTES + 4);
		free(big);
	}
	proto_reader_free(&r);
}

/* Several frames in one feed come out one by one, in order. */
static void test_reader_batches(void **state)
{
	static struct proto_msg m, back;
	uint8_t buf[4096];
	size_t off = 0, len;
	struct proto_reader r;
	const char *json;
	size_t jlen;

	(void)state;
	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_PING;
	for (uint32_t i = 1; i <= 20; i++) {
		m.id = i;
		m.u.ping.mono_ms = i * 10;
		assert_int_equal(proto_encode(&m, buf + off, sizeof(buf) - off, &len, NULL),
				 PROTO_OK);
		off += len;
	}
	proto_reader_init(&r);
	assert_int_equal(proto_reader_feed(&r, buf, off), (long)off);
	for (uint32_t i = 1; i <= 20; i++) {
		assert_int_equal(proto_reader_next(&r, &json, &jlen, NULL), 1);
		assert_int_equal(proto_decode(json, jlen, &back, NULL), PROTO_OK);
		assert_int_equal(back.id, i);
		assert_int_equal(back.u.ping.mono_ms, i * 10);
	}
	assert_int_equal(proto_reader_next(&r, &json, &jlen, NULL), 0);
	proto_reader_free(&r);
}

/* The encoder refuses invalid structs with the decoder's status and field. */
static void test_encoder_validates(void **state)
{
	static struct proto_msg m;
	uint8_t buf[PROTO_ENCODE_MAX_BYTES];
	struct proto_error err;
	size_t len;

	(void)state;
	fill_hello_agent(&m);
	m.u.hello.ram[1].start = 0x2000; /* overlaps ram[0] */
	assert_int_equal(proto_encode(&m, buf, sizeof(buf), &len, &err), PROTO_E_BAD_VALUE);
	assert_string_equal(err.field, "ram[1].start");

	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_STATS;
	m.id = 1;
	m.u.stats.has_psi = true;
	m.u.stats.psi.some_avg10 = __builtin_nan("");
	assert_int_equal(proto_encode(&m, buf, sizeof(buf), &len, &err), PROTO_E_RANGE);
	assert_string_equal(err.field, "psi.some_avg10");

	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_PING;
	assert_int_equal(proto_encode(&m, buf, sizeof(buf), &len, &err), PROTO_E_RANGE);
	assert_string_equal(err.field, "id");

	m.id = 1;
	m.type = (enum proto_msg_type)99;
	assert_int_equal(proto_encode(&m, buf, sizeof(buf), &len, &err), PROTO_E_UNKNOWN_TYPE);

	memset(&m, 0, sizeof(m));
	m.type = PROTO_MSG_ERROR;
	m.id = 1;
	m.u.error.code = PROTO_E_JSON;
	memset(m.u.error.message, 'x', sizeof(m.u.error.message)); /* not terminated */
	assert_int_equal(proto_encode(&m, buf, sizeof(buf), &len, &err), PROTO_E_TOO_LONG);
	assert_string_equal(err.field, "message");
}

static void test_names(void **state)
{
	enum proto_status s;
	enum proto_msg_type t;

	(void)state;
	for (int i = 0; i <= PROTO_E_INTERNAL; i++) {
		const char *n = proto_status_name((enum proto_status)i);

		if (strcmp(n, "invalid") == 0)
			continue;
		assert_true(proto_status_from_name(n, &s));
		assert_int_equal(s, i);
	}
	for (int i = PROTO_MSG_HELLO; i < PROTO_MSG_TYPE_COUNT; i++) {
		assert_true(
		    proto_msg_type_from_name(proto_msg_type_name((enum proto_msg_type)i), &t));
		assert_int_equal(t, i);
	}
	assert_string_equal(proto_msg_type_name((enum proto_msg_type)0), "invalid");
	assert_string_equal(proto_status_name((enum proto_status) - 5), "invalid");
	assert_int_equal(proto_cap_from_name("reclaim.memcg"), PROTO_CAP_RECLAIM_MEMCG);
	assert_null(proto_cap_name(3));
	assert_true(proto_status_is_fatal(PROTO_E_TRUNCATED));
	assert_false(proto_status_is_fatal(PROTO_E_UNKNOWN_FIELD));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),        cmocka_unit_test(test_largest_messages),
	    cmocka_unit_test(test_hostile_table),     cmocka_unit_test(test_error_names_id),
	    cmocka_unit_test(test_reader_frames),     cmocka_unit_test(test_reader_batches),
	    cmocka_unit_test(test_encoder_validates), cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
