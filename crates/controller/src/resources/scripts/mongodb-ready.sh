# Ready once the server serves: the writable primary, or a secondary that has caught up
# (not while it starts, copies its initial data or recovers). It asks `hello`, which
# needs no login, over the wire protocol from bash: the probe runs every 10 seconds on
# every member, and starting mongosh's JavaScript runtime for it costs about a CPU second.
exec 3<>/dev/tcp/127.0.0.1/27017 || exit 1
# OP_MSG (opcode 2013), one body section: { hello: 1, $db: "admin" }.
printf '\x34\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\xdd\x07\x00\x00\x00\x00\x00\x00\x00\x1f\x00\x00\x00\x10hello\x00\x01\x00\x00\x00\x02$db\x00\x06\x00\x00\x00admin\x00\x00' >&3 || exit 1
length=$(timeout 2 dd bs=4 count=1 iflag=fullblock <&3 2>/dev/null | od -An -tu4 | tr -d ' \n')
case "$length" in '' | *[!0-9]*) exit 1 ;; esac
[ "$length" -gt 4 ] && [ "$length" -lt 1048576 ] || exit 1
reply=$(timeout 2 dd bs=$((length - 4)) count=1 iflag=fullblock <&3 2>/dev/null | od -An -v -tx1 | tr -d '\n')
# A boolean (type 08) isWritablePrimary or secondary that is true (01).
case "$reply" in
*" 08 69 73 57 72 69 74 61 62 6c 65 50 72 69 6d 61 72 79 00 01"*) exit 0 ;;
*" 08 73 65 63 6f 6e 64 61 72 79 00 01"*) exit 0 ;;
esac
exit 1
