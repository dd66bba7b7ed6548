#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# docs_commands.sh: the shell commands in README.md and docs/operations.md work when pasted.
#
# Every command of a code block (an indented or fenced block; comments after "  #" dropped)
# is run here when it can be, in a private mount and network namespace (unshare -mn: a tmpfs
# on /run and a loopback of its own), so the default paths the docs use (the control socket
# /run/memtide/memtided.sock, metrics on 127.0.0.1:9848, the agent's /run socket) are real
# and private, and nothing of this shared host is touched.  memtided runs there on libvirt's
# in-process test driver (LIBVIRT_DEFAULT_URI=test:///default, for memtidectl domxml-patch
# and virsh too), whose one domain, "test", stands for the docs' DOMAIN.
#
# Blocks fenced as ```text hold output (log lines), not commands.
#
# Not run, each for its reason (printed as a SKIP line): `make demo` and `make check` (they
# are CI itself, minutes long), `make deb` (tests/packaging/deb.sh runs it), `apt install`
# of the package (it would install on this shared host; the file name is checked to be the
# one make deb writes), `systemctl` (systemd does not run on these machines, and it would
# change the host's services; tests/integration/systemd_unit.sh checks the units).
# `make install` runs with a DESTDIR.  A command no rule knows fails: a new command in the
# docs must be given a way to be checked.
#
# Inline code spans that start like a command (`memtidectl ...`, `virsh ...`) are not run
# (most name a command in a sentence, with placeholders), but one that a line break splits
# fails: pasted, it is two broken commands.
set -u
BUILD=${BUILD:-build}
BIN=${MEMTIDE_BIN:-$PWD/$BUILD/bin}
dir=$(mktemp -d /tmp/memtide-it-docs.XXXXXX)
trap 'rm -rf "$dir"' EXIT

python3 - README.md docs/operations.md >"$dir/commands" 2>"$dir/wrapped" <<'PY'
import re, sys
CMD = r'(memtidectl|memtided|memtide-agent|systemctl|virsh|make|curl|journalctl|apt)\b'
for path in sys.argv[1:]:
    lines = open(path).read().split('\n')
    prev_blank, in_code, fenced, output = True, False, False, False
    for no, line in enumerate(lines, 1):
        if line.startswith('```'):
            fenced = not fenced
            # ```text (or any language but a shell's) holds output, not commands
            lang = line[3:].strip()
            output = fenced and lang not in ('', 'sh', 'bash', 'shell', 'console')
            continue
        if output:
            continue
        code = fenced or (line.startswith('    ') and (prev_blank or in_code)
                          and not re.match(r'\s*[-*|]', line))
        in_code = code and not fenced
        prev_blank = not line.strip() or line.startswith('#')  # a heading ends a paragraph too
        if not code:
            continue
        cmd = re.sub(r'\s+#\s.*$', '', line).strip()
        if cmd and not cmd.startswith('#'):
            print('%s:%d\t%s' % (path, no, cmd))
    # Inline spans, over the text with line breaks kept: a command split by one.
    text = '\n'.join(l for l in lines if not l.startswith('    '))
    for m in re.finditer(r'`([^`]+)`', text):
        if '\n' in m.group(1) and re.match(CMD, m.group(1)):
            no = text[:m.start()].count('\n') + 1
            print('%s:~%d: a command split over two lines: `%s`' % (path, no, m.group(1).replace('\n', '\\n')),
                  file=sys.stderr)
PY
total=$(($(wc -l <"$dir/commands") + 1))
echo "1..$total"
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; failed=1; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $*"; }

if [ -s "$dir/wrapped" ]; then
	sed 's/^/# /' "$dir/wrapped"
	nok "no inline command is split over two lines"
else
	ok "no inline command is split over two lines"
fi

# The runner: what runs inside the namespace, one command per line on stdin, "rc<TAB>cmd"
# out.  memtided is started first, with every default path.
cat >"$dir/runner.sh" <<'EOF'
set -u
ip link set lo up
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /var/lib # memtided's state dir, /var/lib/memtide, private too
mkdir -p /run/memtide
: >"$DIR/empty.conf"
export LIBVIRT_DEFAULT_URI=test:///default PATH=$BIN:$PATH
memtided --foreground --uri test:///default --config "$DIR/empty.conf" >"$DIR/memtided.log" 2>&1 &
mpid=$!
for _ in $(seq 100); do
	memtidectl status 2>/dev/null | grep -q '^test ' && break
	sleep 0.1
done
# A history for the test domain, for `vm history`: a release's first step (the test driver's
# domain runs at 2 of its 8 GiB), then a resume.
memtidectl release test >/dev/null
for _ in $(seq 100); do
	memtidectl vm history test >/dev/null 2>&1 && break
	sleep 0.1
done
memtidectl resume test >/dev/null
trypid=
while IFS=$'\t' read -r where cmd; do
	cmd=${cmd//DOMAIN/test}
	# A try-out's own directory (/tmp/try in the docs) is this test's.
	cmd=${cmd//\/tmp\/try/$DIR/try}
	case $cmd in
	"memtided --foreground"*) # a second memtided, left running for the commands after it
		mkdir -p "$DIR/try"
		bash -c "$cmd" </dev/null >"$DIR/try.log" 2>&1 &
		trypid=$!
		sock=$(sed -n 's/.*--socket \([^ ]*\).*/\1/p' <<<"$cmd")
		for _ in $(seq 100); do memtidectl --socket "$sock" status >/dev/null 2>&1 && break; sleep 0.1; done
		memtidectl --socket "$sock" status >"$DIR/out" 2>&1
		rc=$?
		cat "$DIR/try.log" >>"$DIR/out" ;;
	"memtidectl top"*) # runs until q: three seconds of it, then the timeout's 124
		timeout 3 bash -c "$cmd" </dev/null >"$DIR/out" 2>&1
		rc=$?
		[ $rc = 124 ] && grep -q test "$DIR/out" && rc=0 ;;
	"memtide-agent --foreground"*) # an agent keeps running (it looks for its port)
		timeout 2 bash -c "$cmd" </dev/null >"$DIR/out" 2>&1
		rc=$?
		[ $rc = 124 ] && rc=0 ;;
	*)
		timeout 60 bash -c "$cmd" </dev/null >"$DIR/out" 2>&1
		rc=$? ;;
	esac
	printf '%s\t%s\t%s\t%s\n' "$rc" "$where" "$cmd" "$(head -c 300 "$DIR/out" | tr '\n\t' '  ')"
done
[ -n "$trypid" ] && kill $trypid && wait $trypid
kill $mpid
wait $mpid
EOF

version=$(dpkg-parsechangelog -S Version 2>/dev/null)
: >"$dir/to-run"
while IFS=$'\t' read -r where cmd; do
	case $cmd in
	"make demo"* | "make check"*) skip "$where: $cmd: minutes long, it is what CI runs" ;;
	"make deb"*) skip "$where: $cmd: tests/packaging/deb.sh runs it" ;;
	"make install"*)
		# Under make sanitize (BUILD=build/san) the objects are instrumented: link them so.
		sanflag=
		[ "${BUILD##*/}" = san ] && sanflag=SAN=1
		if (eval "$cmd DESTDIR=$dir/root $sanflag") >"$dir/install.log" 2>&1; then
			ok "$where: $cmd (with DESTDIR)"
		else
			sed 's/^/# /' "$dir/install.log" | tail -5
			nok "$where: $cmd (with DESTDIR)"
		fi ;;
	"apt install ./build/deb/"*)
		f=${cmd#apt install ./build/deb/}
		if [ "$f" = "memtide_${version}_amd64.deb" ]; then
			skip "$where: $cmd: would install on this shared host (deb.sh checks the package; the file name is make deb's)"
		else
			nok "$where: $cmd: make deb writes memtide_${version}_amd64.deb, not $f"
		fi ;;
	"systemctl "*) skip "$where: $cmd: systemd is not running here and it would change this host's services (systemd_unit.sh checks the units)" ;;
	"qemu-system-x86_64 -accel kvm ... "*) skip "$where: $cmd: a KVM guest's command line ('...' for its own arguments): no KVM here (tests/kvm/kernel_vsock.sh starts QEMU so in the KVM host stand)" ;;
	"memtided --qmp "*" --agent vsock"*)
		# The kernel's vsock needs a KVM guest (tests/kvm/kernel_vsock.sh, in the stand);
		# here: memtided takes the option as written.
		if "$BUILD/bin/memtided" --help 2>&1 | grep -q -- '--agent vsock  '; then
			skip "$where: $cmd: needs a KVM guest with vhost-vsock (tests/kvm/kernel_vsock.sh runs it in the KVM host stand); memtided --help has the option"
		else
			nok "$where: $cmd: memtided --help has no '--agent vsock'"
		fi ;;
	"qemu-system-x86_64 ... "*) skip "$where: $cmd: a QEMU command line with '...' for the guest's own arguments (scenarios 08 and 16 start QEMU with these arguments)" ;;
	"dev=\$(cat /sys/class/zram-control/hot_add)"* | "echo "*" >/sys/block/zram"* | "fallocate "*"/var/swap."* | "mkswap "* | "echo "*" >/sys/module/zswap/"*)
		skip "$where: $cmd: sets up this host's swap (tests/e2e/lib_zram.sh does the same on a zram device of its own and removes it)" ;;
	"/usr/lib/memtide/memtide-zram-swap "*)
		skip "$where: $cmd: turns this host's swap off (tests/integration/zram_swap.sh runs the helper, stop --force too, on a zram device of its own)" ;;
	"memtidectl domxml-patch "*" --ept"*) skip "$where: $cmd: libvirt's test driver has no TCG domain (tests/integration/domxml_ept.sh runs it against the real libvirtd)" ;;
	memtidectl* | curl* | virsh* | "memtide-agent "* | "memtided --foreground"* | "MEMTIDE_SOCKET="*)
		printf '%s\t%s\n' "$where" "$cmd" >>"$dir/to-run" ;;
	*) nok "$where: $cmd: no rule says how to check this command (tests/integration/docs_commands.sh)" ;;
	esac
done <"$dir/commands"

if [ -s "$dir/to-run" ]; then
	DIR=$dir BIN=$BIN unshare -mn bash "$dir/runner.sh" <"$dir/to-run" >"$dir/results" 2>"$dir/runner.err"
	[ -s "$dir/runner.err" ] && sed 's/^/# runner: /' "$dir/runner.err"
	while IFS=$'\t' read -r where cmd; do
		line=$(grep -F "	$where	" "$dir/results" | head -1)
		rc=${line%%	*}
		if [ "$rc" = 0 ]; then
			ok "$where: $cmd"
		else
			echo "# exit ${rc:-none}: $(echo "$line" | cut -f4)"
			nok "$where: $cmd"
		fi
	done <"$dir/to-run"
	[ "$failed" = 0 ] || tail -5 "$dir/memtided.log" | sed 's/^/# memtided: /'
fi
exit $failed
