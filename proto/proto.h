/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * proto.h - the memtide host-agent protocol: the one door a guest has into the host.
 *
 * memtided (host) and memtide-agent (guest) talk over a byte stream (virtio-serial port,
 * AF_VSOCK or a unix socket).  The stream is a sequence of frames:
 *
 *   +----------------+---------------------------------------------+
 *   | length (4 B)   | payload: exactly one JSON object, UTF-8     |
 *   | big-endian u32 | 1 .. PROTO_FRAME_MAX_BYTES bytes            |
 *   +----------------+---------------------------------------------+
 *
 * Every payload is a flat JSON object {"type": NAME, "id": N, ...fields}.  docs/protocol.md
 * specifies every message, field, unit and range; this header is its C mirror: one typed
 * struct per message, one codec (json-c) that turns structs into frames and frames into
 * structs, and the small pieces of connection policy both sides share (error budget, rate
 * limit, reconnect backoff, version negotiation).
 *
 * The decoder treats every byte as hostile: unknown types, unknown fields, missing fields,
 * wrong JSON types, numbers out of range (every integer is also capped at 2^53 - 1, so the
 * wire is exact for any JSON reader), NaN/Infinity, invalid UTF-8, duplicate keys, nesting
 * deeper than PROTO_JSON_MAX_DEPTH, strings and arrays over their bound - each is a named
 * status and a field path, never a crash and never an unbounded allocation.  The encoder runs
 * the same validator first, so a side never sends what its peer would reject.
 *
 * Conventions: functions return enum proto_status (PROTO_OK == 0; errors are positive,
 * named, with a wire name from proto_status_name()), except the I/O helpers, which return
 * byte counts or a negative errno, as read(2)/write(2) would.  Sizes are bytes (_bytes),
 * times ms (_ms), counters are plain counts.  Nothing here reads a clock: callers pass
 * now_ms (CLOCK_MONOTONIC).  No global state; objects are not thread-safe, one connection
 * is owned by one thread.  Names are prefixed proto_ / PROTO_.
 */
#ifndef MEMTIDE_PROTO_H
#define MEMTIDE_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================================
 * Limits (every one is a wire rule; docs/protocol.md quotes them)
 * ====================================================================================== */

#define PROTO_VERSION_MIN     1     /* oldest protocol version this code speaks */
#define PROTO_VERSION_MAX     1     /* newest */
#define PROTO_VERSION_LIMIT   65535 /* a version field above this is out of range */
#define PROTO_FRAME_HDR_BYTES 4
#define PROTO_FRAME_MAX_BYTES (1u << 20) /* payload bound: a longer frame breaks the stream */
#define PROTO_JSON_MAX_DEPTH  4          /* deepest message: object > array > object (3), +1 */
#define PROTO_INT_MAX         ((1ULL << 53) - 1) /* largest integer on the wire, any field */
#define PROTO_ID_MAX          0xffffffffu        /* ids are 1 .. 2^32-1; 0 means "none" */

#define PROTO_SOFTWARE_MAX      64  /* "memtide-agent 0.1.0": bytes incl. NUL */
#define PROTO_KERNEL_MAX        65  /* struct utsname release incl. NUL */
#define PROTO_FIELD_MAX         64  /* error.field: a field path, "gens[3].age_ms" */
#define PROTO_MESSAGE_MAX       256 /* error.message / reclaim_reply.message incl. NUL */
#define PROTO_MAX_RAM_RANGES    64  /* hello.ram: System RAM ranges of /proc/iomem */
#define PROTO_MAX_CAPS          32  /* length of a caps array on the wire */
#define PROTO_MAX_GENS          64  /* wss.gens: generations over all memcgs and nodes */
#define PROTO_MAX_WSS_BINS      16  /* wss.bins and config.wss_bins_ms */
#define PROTO_MAX_HINT_RANGES   256 /* hint.ranges */
#define PROTO_MAX_RECLAIM_STEPS 4   /* reclaim_reply.steps: one per method */
#define PROTO_MAX_COLLECTORS    8   /* config.collectors */

#define PROTO_PAGE_SIZE_MIN 4096
#define PROTO_PAGE_SIZE_MAX 65536
#define PROTO_PHYS_ADDR_MAX (1ULL << 52)  /* 52-bit physical address space (x86 LA57, arm64) */
#define PROTO_BYTES_MAX     (1ULL << 52)  /* any memory size */
#define PROTO_PAGES_MAX     (1ULL << 40)  /* any page count */
#define PROTO_COUNTER_MAX   PROTO_INT_MAX /* cumulative kernel counters (vmstat, PSI us) */
#define PROTO_PSI_AVG_MAX   100.0         /* PSI averages are percentages */

#define PROTO_INTERVAL_MIN_MS 100u      /* config.report_interval_ms, wss_interval_ms */
#define PROTO_INTERVAL_MAX_MS 3600000u  /* one hour */
#define PROTO_DEADLINE_MIN_MS 1u        /* reclaim.deadline_ms */
#define PROTO_DEADLINE_MAX_MS 600000u   /* ten minutes */
#define PROTO_WITHIN_MAX_MS   86400000u /* hint need.within_ms: one day */
#define PROTO_AGE_MAX_MS      PROTO_INT_MAX

#define PROTO_DEFAULT_REPORT_INTERVAL_MS 2000u
#define PROTO_DEFAULT_WSS_INTERVAL_MS    10000u

/* ======================================================================================
 * Status codes: wire names in proto_status_name(); values are stable (never reuse one)
 * ====================================================================================== */

enum proto_status {
	PROTO_OK = 0,
	/* stream level: the byte stream cannot be resynchronised; close the connection */
	PROTO_E_FRAME_TOO_LARGE = 1, /* length prefix > PROTO_FRAME_MAX_BYTES */
	PROTO_E_FRAME_EMPTY = 2,     /* length prefix 0 */
	PROTO_E_TRUNCATED = 3,       /* EOF inside a frame */
	/* frame level: this frame is rejected, the stream goes on */
	PROTO_E_JSON = 10,          /* not JSON (syntax), or trailing bytes after the object */
	PROTO_E_DEPTH = 11,         /* nested deeper than PROTO_JSON_MAX_DEPTH */
	PROTO_E_UTF8 = 12,          /* invalid UTF-8 in a string */
	PROTO_E_NOT_OBJECT = 13,    /* payload is JSON but not an object */
	PROTO_E_DUPLICATE_KEY = 14, /* a key appears twice in one object */
	PROTO_E_UNKNOWN_TYPE = 15,  /* "type" names no message */
	PROTO_E_MISSING_FIELD = 16, /* a required field is absent */
	PROTO_E_UNKNOWN_FIELD = 17, /* a field this message does not have */
	PROTO_E_WRONG_TYPE = 18,    /* a field has the wrong JSON type (also 1.5 for an integer) */
	PROTO_E_RANGE = 19,         /* a number outside its range, NaN, Infinity */
	PROTO_E_TOO_LONG = 20,      /* a string or array longer than its bound */
	PROTO_E_BAD_VALUE = 21,     /* an enum string not in its set; misaligned or overlapping */
	/* session level */
	PROTO_E_VERSION = 30,     /* no common protocol version */
	PROTO_E_STATE = 31,       /* message not allowed now (before hello, wrong direction) */
	PROTO_E_RATE = 32,        /* peer sends faster than its rate limit */
	PROTO_E_BUSY = 33,        /* request refused: one like it is still running */
	PROTO_E_UNSUPPORTED = 34, /* the receiver lacks the capability the request needs */
	/* local */
	PROTO_E_NOSPC = 40,    /* output buffer or queue too small */
	PROTO_E_NOMEM = 41,    /* allocation failed */
	PROTO_E_INTERNAL = 42, /* a bug: please report */
};

/* Wire/log name of a status ("unknown_field"); "invalid" for a value outside the enum. */
const char *proto_status_name(enum proto_status s);
/* Inverse of proto_status_name; returns false for an unknown name. */
bool proto_status_from_name(const char *name, enum proto_status *out);
/* True for the stream-level errors after which the connection must be closed. */
bool proto_status_is_fatal(enum proto_status s);

/*
 * Details of a failure, filled by the codec.  field is a path into the message ("type",
 * "ram[2].bytes", "" when the frame as a whole is at fault); message is one sentence for a
 * log or for an error reply.  re is the id of the offending message when it could be read
 * (0 otherwise), so the error reply can name it.
 */
struct proto_error {
	enum proto_status code;
	uint32_t re;
	char field[PROTO_FIELD_MAX];
	char message[PROTO_MESSAGE_MAX];
};

/* ======================================================================================
 * Messages
 * ====================================================================================== */

/* Wire values are the order of the name table; "type" on the wire is the name. */
enum proto_msg_type {
	PROTO_MSG_HELLO = 1,         /* both ways, first message on a connection */
	PROTO_MSG_STATS = 2,         /* agent -> host, every report interval */
	PROTO_MSG_WSS = 3,           /* agent -> host, guest MGLRU working-set histogram */
	PROTO_MSG_HINT = 4,          /* agent -> host, hot/cold ranges or a need */
	PROTO_MSG_RECLAIM = 5,       /* host -> agent, request */
	PROTO_MSG_RECLAIM_REPLY = 6, /* agent -> host, answer to reclaim */
	PROTO_MSG_CONFIG = 7,        /* host -> agent, request */
	PROTO_MSG_CONFIG_REPLY = 8,  /* agent -> host, the configuration now in force */
	PROTO_MSG_PING = 9,          /* either way, request */
	PROTO_MSG_PONG = 10,         /* answer to ping */
	PROTO_MSG_ERROR = 11,        /* either way: the receiver rejected a message */
};
#define PROTO_MSG_TYPE_COUNT 12 /* one past the largest value, for name tables */

/* "hello", "reclaim_reply", ...; "invalid" for a value outside the enum. */
const char *proto_msg_type_name(enum proto_msg_type t);
bool proto_msg_type_from_name(const char *name, enum proto_msg_type *out);

/* Capabilities, one bit each; on the wire an array of names (proto_cap_name). A receiver
 * ignores capability names it does not know: that is what negotiation is for. */
enum proto_cap {
	PROTO_CAP_STATS = 1u << 0,         /* agent sends stats (/proc/meminfo, vmstat) */
	PROTO_CAP_PSI = 1u << 1,           /* stats carry PSI (/proc/pressure/memory) */
	PROTO_CAP_WSS = 1u << 2,           /* agent sends wss (guest MGLRU debugfs) */
	PROTO_CAP_HINT = 1u << 3,          /* agent forwards application hints */
	PROTO_CAP_RAM_LAYOUT = 1u << 4,    /* hello.ram is filled (/proc/iomem readable) */
	PROTO_CAP_RECLAIM_MEMCG = 1u << 5, /* cgroup v2 memory.reclaim on the root */
	PROTO_CAP_RECLAIM_MGLRU = 1u << 6, /* MGLRU eviction command '-' */
	PROTO_CAP_RECLAIM_DROP_CACHES = 1u
					<< 7, /* drop clean page cache (allowed by guest admin) */
	PROTO_CAP_RECLAIM_COMPACT = 1u << 8,  /* /proc/sys/vm/compact_memory */
	/* host side: which requests the host may send and which reports it consumes */
	PROTO_CAP_HOST_RECLAIM = 1u << 16, /* host sends reclaim requests */
	PROTO_CAP_HOST_WSS = 1u << 17,     /* host consumes wss */
	PROTO_CAP_HOST_HINT = 1u << 18,    /* host consumes hints */
};
/* Name of one capability bit ("reclaim.memcg"); NULL if cap is not exactly one known bit. */
const char *proto_cap_name(uint32_t cap);
/* Bit for a name; 0 for an unknown name. */
uint32_t proto_cap_from_name(const char *name);

/* Which side sent a hello. */
enum proto_role {
	PROTO_ROLE_AGENT = 1,
	PROTO_ROLE_HOST = 2,
};
const char *proto_role_name(enum proto_role r);

/* [start, start + bytes) of guest-physical memory; start and bytes page aligned, bytes > 0. */
struct proto_range {
	uint64_t start;
	uint64_t bytes;
};

/*
 * hello: the first message each side sends.  The agent's carries the guest's facts; the
 * host's carries only versions, software and caps (kernel, page_size_bytes and ram are
 * absent on the wire and zero here; they are an unknown field in a host hello).
 * Each side computes the version to speak with proto_version_negotiate().
 */
struct proto_hello {
	enum proto_role role;
	uint32_t version_min;              /* 1 .. PROTO_VERSION_LIMIT */
	uint32_t version_max;              /* version_min .. PROTO_VERSION_LIMIT */
	char software[PROTO_SOFTWARE_MAX]; /* "memtide-agent 0.1.0"; non-empty, printable */
	uint32_t caps;                     /* enum proto_cap bits */
	/* agent only */
	char kernel[PROTO_KERNEL_MAX]; /* uname -r; non-empty, printable */
	uint32_t page_size_bytes;      /* power of two, PROTO_PAGE_SIZE_MIN..MAX */
	uint32_t nr_ram;               /* 0 when /proc/iomem is unreadable (no RAM_LAYOUT) */
	struct proto_range ram[PROTO_MAX_RAM_RANGES]; /* ascending, non-overlapping; wire "ram" */
};

/*
 * stats: the guest's memory figures, every report interval.  Byte fields come from
 * /proc/meminfo (kB * 1024); counters from /proc/vmstat are cumulative since guest boot (0
 * when the guest kernel lacks the counter: before 5.9 workingset_refault_anon/file did not
 * exist).  PSI is present when has_psi (cap "psi"); on the wire the field "psi" is an object
 * {some_avg10, some_avg60, some_total_us, full_avg10, full_avg60, full_total_us}.
 */
struct proto_psi {
	double some_avg10; /* % of time some task stalled on memory, 10 s average, 0..100 */
	double some_avg60;
	uint64_t some_total_us; /* cumulative stall time, microseconds */
	double full_avg10;      /* % of time all non-idle tasks stalled */
	double full_avg60;
	uint64_t full_total_us;
};

struct proto_stats {
	uint64_t mono_ms; /* guest CLOCK_MONOTONIC when collected */
	uint64_t mem_total_bytes;
	uint64_t mem_free_bytes;
	uint64_t mem_available_bytes;
	uint64_t cached_bytes;
	uint64_t anon_bytes; /* AnonPages */
	uint64_t shmem_bytes;
	uint64_t swap_total_bytes;
	uint64_t swap_free_bytes;
	uint64_t refault_anon; /* workingset_refault_anon */
	uint64_t refault_file; /* workingset_refault_file */
	uint64_t pgmajfault;
	uint64_t pswpin;
	uint64_t pswpout;
	bool has_psi;
	struct proto_psi psi;
};

/*
 * wss: the guest's own working set as its multi-generational LRU sees it.  The agent asks
 * the kernel to age ('+'), reads /sys/kernel/debug/lru_gen, and sends:
 *   gens  every generation (over all memcgs and nodes), ascending age; when there are more
 *         than PROTO_MAX_GENS, gens_complete is false and gens holds the youngest ones;
 *   bins  the same pages folded into idle-age bins: bin i holds memory whose generation age
 *         is >= bins[i].min_age_ms and < bins[i+1].min_age_ms (the last bin is open-ended).
 *         bins[0].min_age_ms is 0; edges ascend strictly (config.wss_bins_ms sets them).
 */
struct proto_wss_gen {
	uint32_t memcg_id; /* memcg id as lru_gen prints it */
	uint32_t node;     /* NUMA node, < 1024 */
	uint64_t seq;      /* generation sequence number within its lruvec */
	uint64_t age_ms;   /* time since this generation was created */
	uint64_t anon_pages;
	uint64_t file_pages;
};

struct proto_wss_bin {
	uint64_t min_age_ms;
	uint64_t anon_bytes;
	uint64_t file_bytes;
};

struct proto_wss {
	uint64_t mono_ms;
	bool gens_complete;
	uint32_t nr_gens; /* 0 .. PROTO_MAX_GENS */
	struct proto_wss_gen gens[PROTO_MAX_GENS];
	uint32_t nr_bins; /* 1 .. PROTO_MAX_WSS_BINS */
	struct proto_wss_bin bins[PROTO_MAX_WSS_BINS];
};

/*
 * hint: an application in the guest declared some of its memory hot or cold (the agent has
 * translated its virtual ranges into guest-physical ones through /proc/PID/pagemap), or
 * announced that it will need need_bytes within within_ms (before a job starts).
 *   kind hot/cold: ranges non-empty, ascending, non-overlapping, page aligned; need_* zero.
 *   kind need:     need_bytes > 0, within_ms 0..PROTO_WITHIN_MAX_MS; no ranges.
 * truncated: ranges of the application's request were left out (too many, or over the hint
 * rate); a request larger than one message comes as several, and the last one carries it.
 */
enum proto_hint_kind {
	PROTO_HINT_HOT = 1,
	PROTO_HINT_COLD = 2,
	PROTO_HINT_NEED = 3,
};
const char *proto_hint_kind_name(enum proto_hint_kind k);

struct proto_hint {
	enum proto_hint_kind kind;
	uint32_t pid; /* guest pid that asked (informational), 1 .. 2^22 */
	bool truncated;
	uint32_t nr_ranges;
	struct proto_range ranges[PROTO_MAX_HINT_RANGES];
	uint64_t need_bytes;
	uint64_t within_ms;
};

/*
 * reclaim (host -> agent): free about bytes of guest memory within deadline_ms.  scope says
 * what may be reclaimed: page cache only, or anonymous memory too (the guest swaps or
 * compresses it).  compact asks for /proc/sys/vm/compact_memory afterwards, so the freed
 * memory forms 2 MiB blocks that free page reporting returns to the host.
 */
enum proto_reclaim_scope {
	PROTO_SCOPE_FILE = 1, /* "file": clean page cache only */
	PROTO_SCOPE_ANY = 2,  /* "any": anon too */
};
const char *proto_reclaim_scope_name(enum proto_reclaim_scope s);

struct proto_reclaim {
	uint64_t bytes; /* 1 .. PROTO_BYTES_MAX, page multiple not required */
	enum proto_reclaim_scope scope;
	uint32_t deadline_ms; /* PROTO_DEADLINE_MIN_MS .. PROTO_DEADLINE_MAX_MS, relative */
	bool compact;
};

/* How the agent reclaimed, best first; one step per method tried. */
enum proto_reclaim_method {
	PROTO_METHOD_MEMCG = 1,       /* "memcg": root cgroup v2 memory.reclaim */
	PROTO_METHOD_MGLRU = 2,       /* "mglru": lru_gen '-' eviction */
	PROTO_METHOD_DROP_CACHES = 3, /* "drop_caches": echo 1 > drop_caches */
	PROTO_METHOD_COMPACT = 4,     /* "compact": compact_memory (frees nothing by itself) */
};
const char *proto_reclaim_method_name(enum proto_reclaim_method m);

/* Outcome of the whole request. */
enum proto_reclaim_result {
	PROTO_RECLAIM_DONE = 1,        /* "done": freed >= requested */
	PROTO_RECLAIM_PARTIAL = 2,     /* "partial": freed less (kernel could not, deadline) */
	PROTO_RECLAIM_FLOOR = 3,       /* "floor": stopped/refused at the MemAvailable floor */
	PROTO_RECLAIM_UNSUPPORTED = 4, /* "unsupported": no method available for this scope */
	PROTO_RECLAIM_FAILED = 5,      /* "failed": every method tried returned an error */
};
const char *proto_reclaim_result_name(enum proto_reclaim_result r);

struct proto_reclaim_step {
	enum proto_reclaim_method method;
	uint64_t freed_bytes; /* MemFree after - before, floored at 0 (measured, not asked) */
	uint32_t elapsed_ms;
	int32_t err; /* 0, or the errno the kernel returned (positive), 1 .. 4095 */
};

struct proto_reclaim_reply {
	uint32_t re; /* id of the reclaim request */
	enum proto_reclaim_result result;
	uint64_t requested_bytes;
	uint64_t freed_bytes;         /* sum of steps; MemFree delta over the whole request */
	uint64_t mem_available_bytes; /* after */
	uint64_t floor_bytes;         /* the agent's MemAvailable floor */
	uint32_t elapsed_ms;
	uint32_t nr_steps;
	struct proto_reclaim_step steps[PROTO_MAX_RECLAIM_STEPS];
	char message[PROTO_MESSAGE_MAX]; /* a sentence: why partial/floor/failed; may be empty */
};

/*
 * config (host -> agent) and config_reply (the configuration now in force).  collectors is
 * a set of PROTO_COLLECT_* bits, on the wire an array of names.  wss_bins_ms are the bin
 * edges for wss: first 0, strictly ascending, 1..PROTO_MAX_WSS_BINS of them.
 */
enum proto_collector {
	PROTO_COLLECT_STATS = 1u << 0, /* "stats" */
	PROTO_COLLECT_WSS = 1u << 1,   /* "wss" */
	PROTO_COLLECT_HINT = 1u << 2,  /* "hint": forward application hints */
};
const char *proto_collector_name(uint32_t bit);

struct proto_config {
	uint32_t report_interval_ms; /* stats period, PROTO_INTERVAL_MIN_MS..MAX */
	uint32_t wss_interval_ms;    /* wss period (each one ages the guest LRU) */
	uint32_t collectors;
	uint32_t nr_wss_bins;
	uint64_t wss_bins_ms[PROTO_MAX_WSS_BINS];
};

struct proto_config_reply {
	uint32_t re;
	struct proto_config config; /* in force now; collectors without the capability dropped */
};

/* ping/pong: liveness and round-trip time.  mono_ms is the sender's clock. */
struct proto_ping {
	uint64_t mono_ms;
};

struct proto_pong {
	uint32_t re;
	uint64_t mono_ms;
};

/*
 * error: the sender rejected a message (re: its id, 0 when unknown) or is about to close the
 * connection (fatal).  code is a proto_status; field the field path; message a sentence.
 * A receiver never answers an error with an error.
 */
struct proto_error_msg {
	uint32_t re;
	enum proto_status code;
	bool fatal;
	char field[PROTO_FIELD_MAX];
	char message[PROTO_MESSAGE_MAX];
};

/* One message.  id is the sender's request id, 1 .. PROTO_ID_MAX, increasing per sender. */
struct proto_msg {
	enum proto_msg_type type;
	uint32_t id;
	union {
		struct proto_hello hello;
		struct proto_stats stats;
		struct proto_wss wss;
		struct proto_hint hint;
		struct proto_reclaim reclaim;
		struct proto_reclaim_reply reclaim_reply;
		struct proto_config config;
		struct proto_config_reply config_reply;
		struct proto_ping ping;
		struct proto_pong pong;
		struct proto_error_msg error;
	} u;
};

/* ======================================================================================
 * Codec
 * ====================================================================================== */

/*
 * Check every field of *m against the rules above (the encoder's and the decoder's single
 * validator).  Returns PROTO_OK, or a status with err (may be NULL) naming the field.
 */
enum proto_status proto_validate(const struct proto_msg *m, struct proto_error *err);

/*
 * Encode *m as one complete frame (4-byte length + JSON) into buf[0..cap).  Validates first.
 * On success *frame_len is the frame's size.  Errors: any validation status; PROTO_E_NOSPC
 * when cap is too small (nothing useful in buf); PROTO_E_NOMEM.  Allocates only inside the
 * call (json-c); thread-safe on distinct arguments.  The largest message is well below
 * PROTO_ENCODE_MAX_BYTES; a buffer that size never gets PROTO_E_NOSPC.
 */
#define PROTO_ENCODE_MAX_BYTES (64u * 1024)
enum proto_status proto_encode(const struct proto_msg *m, void *buf, size_t cap, size_t *frame_len,
			       struct proto_error *err);

/*
 * Decode one payload (the JSON object of a frame, without its length prefix) into *out.
 * Strict: see the file comment; every failure is a frame-level status with err naming the
 * field, *out is then unspecified.  Never reads past json[len); json need not be
 * NUL-terminated.  Allocates only inside the call; thread-safe on distinct arguments.
 */
enum proto_status proto_decode(const void *json, size_t len, struct proto_msg *out,
			       struct proto_error *err);

/*
 * The decoder's first half, public because memtided's control socket takes its requests
 * through the same hardened intake: parse json[0..len) into *out, one JSON object, strict
 * JSON, valid UTF-8 (overlong forms refused), no NUL byte and no single-quoted string outside
 * or inside strings, depth <= PROTO_JSON_MAX_DEPTH, at most 8192 members and elements, no
 * duplicate key at any level.  PROTO_OK with *out (caller releases it with json_object_put),
 * or PROTO_E_JSON, _DEPTH, _UTF8, _NOT_OBJECT, _DUPLICATE_KEY, _TOO_LONG, _FRAME_TOO_LARGE,
 * _NOMEM with err saying where; *out is then NULL.  Escapes such as \u0000 are valid JSON
 * and pass: callers check the strings they take (proto_decode does, per field).
 */
struct json_object;
enum proto_status proto_json_parse(const void *json, size_t len, struct json_object **out,
				   struct proto_error *err);

/* Highest version both [min,max] ranges contain: PROTO_OK and *out, or PROTO_E_VERSION. */
enum proto_status proto_version_negotiate(uint32_t my_min, uint32_t my_max, uint32_t peer_min,
					  uint32_t peer_max, uint32_t *out);

/* Fill *m as an error message answering the failure in *err (re, code, field, message). */
void proto_error_to_msg(const struct proto_error *err, uint32_t id, bool fatal,
			struct proto_msg *m);

/* ======================================================================================
 * Incremental frame reader (non-blocking fds)
 * ====================================================================================== */

/*
 * Collects bytes and hands out complete payloads.  Memory is bounded: the buffer grows on
 * demand up to PROTO_FRAME_HDR_BYTES + PROTO_FRAME_MAX_BYTES and no further, whatever the
 * peer sends.  Usage on a non-blocking fd, after poll() says POLLIN:
 *
 *	n = proto_reader_read_fd(&r, fd);   // >0 bytes, 0 EOF, -EAGAIN, -errno
 *	while ((rc = proto_reader_next(&r, &json, &len, &err)) == 1)
 *		handle(json, len);          // valid until the next reader call
 *	if (rc < 0) close the connection;   // err.code is stream-level (fatal)
 *	if (n == 0) { if (proto_reader_pending(&r)) -> PROTO_E_TRUNCATED; close; }
 */
struct proto_reader {
	uint8_t *buf; /* heap, cap bytes; NULL until the first byte */
	size_t cap;   /* allocated size, <= PROTO_FRAME_HDR_BYTES + PROTO_FRAME_MAX_BYTES */
	size_t head;  /* first unconsumed byte */
	size_t tail;  /* one past the last received byte */
	bool broken;  /* a stream-level error happened; only reset/free help */
	enum proto_status broken_code;
};

void proto_reader_init(struct proto_reader *r);
/* Free the buffer; the reader may be re-used after proto_reader_init. */
void proto_reader_free(struct proto_reader *r);
/* Forget buffered bytes and any error (new connection); keeps the buffer. */
void proto_reader_reset(struct proto_reader *r);

/*
 * Append up to len bytes from data.  Returns the number taken (less than len when the next
 * frame's bytes would exceed the bound: call proto_reader_next, then feed the rest), or -1
 * with errno ENOMEM.  Never takes bytes into a broken reader (returns 0).
 */
long proto_reader_feed(struct proto_reader *r, const void *data, size_t len);

/* One read(2) into the buffer: >0 bytes read, 0 at EOF, -EAGAIN, -EINTR or another -errno;
 * -ENOBUFS when a complete frame fills the buffer (call proto_reader_next first), -EPROTO on
 * a broken reader.  Reads at most what the current frame can still need plus 64 KiB. */
long proto_reader_read_fd(struct proto_reader *r, int fd);

/*
 * Next complete payload: returns 1 with *json and *len set (pointing into the reader, valid
 * until the next call on r), 0 when more bytes are needed, -1 when the stream is broken
 * (err filled: PROTO_E_FRAME_TOO_LARGE or PROTO_E_FRAME_EMPTY; every later call returns -1
 * until proto_reader_reset).  err may be NULL.
 */
int proto_reader_next(struct proto_reader *r, const char **json, size_t *len,
		      struct proto_error *err);

/* Bytes of an incomplete frame held (non-zero at EOF means PROTO_E_TRUNCATED). */
size_t proto_reader_pending(const struct proto_reader *r);

/* ======================================================================================
 * Output queue (non-blocking fds)
 * ====================================================================================== */

/*
 * Frames waiting to be written.  A bounded byte queue: proto_writer_queue refuses a frame
 * that would take it past limit_bytes (PROTO_E_NOSPC: the peer is not reading; the caller
 * drops the report, or the connection).  Frames are queued whole, never split by refusal.
 */
struct proto_writer {
	uint8_t *buf;
	size_t cap;
	size_t head;
	size_t tail;
	size_t limit_bytes; /* queue bound, default PROTO_WRITER_DEFAULT_LIMIT */
};
#define PROTO_WRITER_DEFAULT_LIMIT (256u * 1024)

void proto_writer_init(struct proto_writer *w, size_t limit_bytes); /* 0: default */
void proto_writer_free(struct proto_writer *w);
void proto_writer_reset(struct proto_writer *w);
/* Queue a whole frame: PROTO_OK, PROTO_E_NOSPC (over the limit), PROTO_E_NOMEM. */
enum proto_status proto_writer_queue(struct proto_writer *w, const void *frame, size_t len);
/* Encode m and queue it: statuses of proto_encode and proto_writer_queue. */
enum proto_status proto_writer_send(struct proto_writer *w, const struct proto_msg *m,
				    struct proto_error *err);
/* Write queued bytes to a non-blocking fd: 0 when empty, 1 when bytes remain (wait for
 * POLLOUT), or -errno (-EPIPE, -ECONNRESET, ...: the connection is gone).  Uses send()
 * with MSG_NOSIGNAL on sockets, write() otherwise; never raises SIGPIPE on sockets. */
int proto_writer_flush(struct proto_writer *w, int fd);
size_t proto_writer_pending(const struct proto_writer *w);

/* ======================================================================================
 * Connection policy shared by both sides
 * ====================================================================================== */

/*
 * Token bucket: rate_per_s tokens a second, at most burst.  take() returns true and spends
 * one token, or false (the caller drops or delays the message).  Time comes from the caller.
 */
struct proto_rate {
	double tokens;
	double rate_per_s;
	double burst;
	uint64_t last_ms;
	bool started;
};
void proto_rate_init(struct proto_rate *r, double rate_per_s, double burst);
bool proto_rate_take(struct proto_rate *r, uint64_t now_ms);

/*
 * Error budget of one peer.  Each rejected frame costs one point; points leak away at
 * PROTO_BUDGET_LEAK_MS per point; a peer that holds more than PROTO_BUDGET_POINTS points is
 * disconnected.  Stream-level errors disconnect at once.  Messages beyond msg_rate (a
 * proto_rate, PROTO_BUDGET_MSG_RATE/s, burst PROTO_BUDGET_MSG_BURST) cost a point each and
 * are dropped unanswered.  Thus a peer that keeps sending garbage is cut off within ~10
 * frames; one that errs now and then (a version skew) is answered and kept.
 */
#define PROTO_BUDGET_POINTS    10
#define PROTO_BUDGET_LEAK_MS   10000
#define PROTO_BUDGET_MSG_RATE  50.0
#define PROTO_BUDGET_MSG_BURST 200.0

enum proto_verdict {
	PROTO_VERDICT_OK = 0,         /* handle the message */
	PROTO_VERDICT_REJECT = 1,     /* answer with an error message, keep the connection */
	PROTO_VERDICT_DROP = 2,       /* drop silently (rate), keep the connection */
	PROTO_VERDICT_DISCONNECT = 3, /* send a fatal error if possible, close, back off */
};

struct proto_guard {
	uint64_t points_milli; /* error points * 1000, leaking */
	uint64_t last_ms;
	struct proto_rate msg_rate;
	uint64_t nr_errors; /* statistics: errors seen on this connection */
	uint64_t nr_dropped;
};
void proto_guard_init(struct proto_guard *g);
/* Account one received frame before decoding it: OK, DROP or DISCONNECT. */
enum proto_verdict proto_guard_frame(struct proto_guard *g, uint64_t now_ms);
/* Account one failure (status of decode or of handling): REJECT or DISCONNECT. */
enum proto_verdict proto_guard_error(struct proto_guard *g, enum proto_status s, uint64_t now_ms);

/*
 * Reconnect backoff: delays grow from min_ms doubling to max_ms, each with up to 25%
 * random jitter subtracted (rand is any 32-bit random value the caller supplies, keeping this
 * deterministic under test).  Reset after a successful handshake.
 */
struct proto_backoff {
	uint32_t min_ms;
	uint32_t max_ms;
	uint32_t cur_ms; /* next nominal delay */
};
void proto_backoff_init(struct proto_backoff *b, uint32_t min_ms, uint32_t max_ms);
uint32_t proto_backoff_next(struct proto_backoff *b, uint32_t rand);
void proto_backoff_reset(struct proto_backoff *b);

#ifdef __cplusplus
}
#endif

#endif /* MEMTIDE_PROTO_H */
