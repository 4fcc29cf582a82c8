#!/usr/bin/env bash
# rpcrdma_decode.sh OURS.pcapng KERNEL.pcapng
# Decodes two RoCEv2 captures with tshark (InfiniBand -> RPC-over-RDMA -> NFS)
# and prints, for each, the RPC-over-RDMA messages by kind and the chunks they
# carry. Passes when ours has calls and replies, Read, Write and Reply chunks
# and RDMA_NOMSG, and no frame of it is malformed except where the kernel's own
# capture of the same exchange is malformed in the same way (tshark 4.0 flags a
# READ reply whose data came in a Write chunk, whoever sends it).
set -uo pipefail
server=${SERVER_IP:-10.99.0.1}
summary() {  # PCAP -> "key=value ..." on one line, from one tshark pass (each costs seconds under TCG)
  tshark -r "$1" -T fields -E occurrence=f -E separator=/t -e ip.src -e rpcordma.msg_type -e rpcordma.reads_count \
    -e rpcordma.writes_count -e rpcordma.reply_count -e _ws.malformed -e rpc.msgtyp -e nfs.procedure_v3 2>/dev/null |
    awk -F '\t' -v s="$server" '
      { frames++
        if ($6 != "") { bad++; if ($7 == 1 && $8 == 6) bad_read++ }
        if ($2 == "") next
        dir = ($1 == s) ? "reply" : "call"; n[dir]++
        if ($2 == 1) nomsg[dir]++; if ($2 == 4) err++
        if ($3 > 0) rd[dir]++; if ($4 > 0) wr[dir]++; if ($5 > 0) rp[dir]++ }
      END { printf "calls=%d replies=%d nomsg_calls=%d nomsg_replies=%d errors=%d read_chunk_calls=%d " \
                   "write_chunk_calls=%d reply_chunk_calls=%d write_chunk_replies=%d reply_chunk_replies=%d " \
                   "malformed=%d malformed_read_replies=%d frames=%d\n",
                   n["call"], n["reply"], nomsg["call"], nomsg["reply"], err, rd["call"], wr["call"], rp["call"],
                   wr["reply"], rp["reply"], bad, bad_read, frames }'
}
get() { sed -n "s/.*\b$1=\([0-9]*\).*/\1/p" <<<"$2"; }
ours=$(summary "$1") kernel=$(summary "$2")
om=$(get malformed "$ours") orr=$(get malformed_read_replies "$ours") krr=$(get malformed_read_replies "$kernel")
echo "figure: ours   $ours"
echo "figure: kernel $kernel"
rc=0
for k in calls replies read_chunk_calls write_chunk_calls reply_chunk_calls write_chunk_replies nomsg_replies; do
  [ "$(get $k "$ours")" -gt 0 ] 2>/dev/null || { echo "ours: no $k decoded"; rc=1; }
done
[ "$(get errors "$ours")" = 0 ] || { echo "ours: RDMA_ERROR on the wire"; rc=1; }
[ "$om" = "$orr" ] || { echo "ours: $((om - orr)) malformed frames that are not READ replies"; rc=1; }
[ "$orr" = 0 ] || [ "$krr" -gt 0 ] || { echo "ours: malformed READ replies, the kernel's are not"; rc=1; }
exit $rc
