// Bitstream datagrams as paq-bert takes them: each record (fuzz_support.hpp) through
// io::decode_datagram and io::decode_llr_datagram (the soft streams' decoder, a decoder's
// side), then all of them through io::bert_monitor::ingest, the counting side of paq-bert.
//
// Input: byte 0 holds options (bits 0..3: the port's stream, 0 .. 11, or 12 .. 15 for a shared
// port; bits 4..5: the expected format, none, paq, dqe or dqe-raw), then the datagrams.
//
// Checked, besides the sanitizers: a decoded datagram's bits lie inside it and are 768 bytes;
// a current-version paq-format datagram the decoder accepts (header of the current length)
// encodes back to the same bytes; a version 1 datagram (64-byte header) decodes without a time; the monitor counts
// every datagram once, valid or malformed, and never checks more packets than it received.
// An LLR datagram the LLR decoder accepts has its 6144 LLRs inside it, is not also accepted
// as a bitstream, and (current version, header of the current length) encodes back to the
// same bytes. A decoded stream's datagram (payload type 3) has its code's information bytes
// and codeword records, and (likewise, its failed codewords without channel errors) encodes back.
#include "io/bert_monitor.hpp"
#include "io/bitstream.hpp"
#include "tests/fuzz/fuzz_support.hpp"

#include <cstring>
#include <vector>

using namespace paq;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size < 1) return 0;
    const int port_stream = (data[0] & 15) < io::bitstream_streams ? (data[0] & 15) : -1;
    io::bert_monitor_config mc;
    switch ((data[0] >> 4) & 3) {
    case 1: mc.expected_format = io::bitstream_format::paq; break;
    case 2: mc.expected_format = io::bitstream_format::dqe; break;
    case 3: mc.expected_format = io::bitstream_format::dqe_raw; break;
    default: break;
    }
    io::bert_monitor monitor(mc);
    std::uint64_t ingested = 0;

    paq::fuzz::record_reader records({data + 1, size - 1});
    std::span<const std::uint8_t> record;
    while (records.next(record)) {
        const std::vector<std::uint8_t> datagram(record.begin(), record.end());  // exact size: ASan sees over-reads
        const io::decode_result r = io::decode_datagram(datagram);
        if (r.ok()) {
            const auto& d = r.datagram;
            PAQ_FUZZ_CHECK(d.bits.data() >= datagram.data() && d.bits.data() + d.bits.size() <= datagram.data() + datagram.size(),
                           "bits outside the datagram");
            if (d.fec) {
                // A decoded stream's datagram: its code's information bytes and codeword records
                // (the continuous stream: up to a packet's frames, numbered from >= 0).
                const auto framing = dsp::framing_for(d.fec->code);
                PAQ_FUZZ_CHECK(framing.has_value(), "a decoded datagram of a code without a framing");
                const bool words_ok = framing->continuous() ? d.fec->codewords >= 0 && d.fec->codewords <= framing->codewords && d.fec->first_frame >= 0
                                                            : d.fec->codewords == framing->codewords && d.fec->first_frame == -1;
                PAQ_FUZZ_CHECK(words_ok && d.bits.size() == static_cast<std::size_t>(d.fec->codewords * (framing->k / 8)),
                               "a decoded datagram's payload does not match its code");
                PAQ_FUZZ_CHECK(datagram.size() == d.header_length + io::decoded_datagram_bytes(*framing, d.fec->codewords) - io::bitstream_header_bytes,
                               "accepted a decoded datagram of the wrong length");
                bool failed_with_errors = false;
                for (int c = 0; c < d.fec->codewords; ++c) {
                    const auto& res = d.fec->results[static_cast<std::size_t>(c)];
                    failed_with_errors |= !res.converged && res.channel_errors != 0;
                }
                // The encoder writes 0 channel errors for a failed codeword; otherwise the bytes come back.
                if (d.version == io::bitstream_version && d.header_length == io::bitstream_header_bytes && !failed_with_errors) {
                    std::vector<std::uint8_t> again(io::decoded_max_datagram_bytes);
                    const std::span<const dsp::codeword_result> results(d.fec->results.data(), static_cast<std::size_t>(d.fec->codewords));
                    const std::size_t n = framing->continuous()
                                              ? io::encode_stream_decoded_datagram(d.header, d.fec->code, d.fec->first_frame, d.bits, results, again)
                                              : io::encode_decoded_datagram(d.header, d.fec->code, d.bits, results, again);
                    PAQ_FUZZ_CHECK(n == datagram.size() && std::memcmp(again.data(), datagram.data(), n) == 0,
                                   "an accepted decoded datagram does not encode back to its bytes");
                }
                monitor.ingest(datagram, port_stream);
                ++ingested;
                continue;
            }
            PAQ_FUZZ_CHECK(d.bits.size() == io::bitstream_payload_bytes, "bits of " + std::to_string(d.bits.size()) + " bytes");
            // A paq header may be longer than its version's (receivers skip the rest).
            const std::size_t expected = d.format == io::bitstream_format::dqe_raw ? io::datagram_bytes(d.format)
                                         : d.header_length + io::datagram_bytes(d.format) - io::bitstream_header_bytes;
            PAQ_FUZZ_CHECK(datagram.size() == expected, "accepted a datagram of the wrong length");
            PAQ_FUZZ_CHECK(d.version != 1 || d.header.utc_ns == io::bitstream_unknown_utc_ns, "a version 1 datagram with a time");
            if (d.format == io::bitstream_format::paq && d.version == io::bitstream_version &&
                d.header_length == io::bitstream_header_bytes) {
                std::vector<std::uint8_t> again(io::bitstream_max_datagram_bytes);
                const std::size_t n = io::encode_datagram(d.format, d.header, 0, d.bits, again);
                PAQ_FUZZ_CHECK(n == datagram.size() && std::memcmp(again.data(), datagram.data(), n) == 0,
                               "an accepted paq datagram does not encode back to its bytes");
            }
        } else {
            PAQ_FUZZ_CHECK(!r.error.empty(), "rejected without a message");
        }
        const io::llr_decode_result l = io::decode_llr_datagram(datagram);
        if (l.ok()) {
            const auto& d = l.datagram;
            PAQ_FUZZ_CHECK(!r.ok(), "a datagram accepted both as a bitstream and as LLRs");
            PAQ_FUZZ_CHECK(d.llrs.size() == io::llr_payload_bytes, "LLRs of " + std::to_string(d.llrs.size()) + " bytes");
            PAQ_FUZZ_CHECK(reinterpret_cast<const std::uint8_t*>(d.llrs.data()) == datagram.data() + d.header_length &&
                               d.header_length + d.llrs.size() == datagram.size(),
                           "LLRs outside the datagram or of the wrong length");
            if (d.version == io::bitstream_version && d.header_length == io::bitstream_header_bytes) {
                std::vector<std::uint8_t> again(io::llr_datagram_bytes);
                const std::size_t n = io::encode_llr_datagram(d.header, d.llrs, again);
                PAQ_FUZZ_CHECK(n == datagram.size() && std::memcmp(again.data(), datagram.data(), n) == 0,
                               "an accepted LLR datagram does not encode back to its bytes");
            }
        } else {
            PAQ_FUZZ_CHECK(!l.error.empty(), "an LLR datagram rejected without a message");
        }
        monitor.ingest(datagram, port_stream);
        ++ingested;
    }
    PAQ_FUZZ_CHECK(monitor.datagrams_total() + monitor.malformed_total() == ingested,
                   std::to_string(monitor.datagrams_total()) + " valid + " + std::to_string(monitor.malformed_total()) +
                       " malformed != " + std::to_string(ingested) + " ingested");
    std::uint64_t per_stream = 0;
    for (int s = 0; s < io::bert_monitor::tracked_streams; ++s) {
        const io::bert_stream_stats st = monitor.stats(s);
        per_stream += st.datagrams;
        PAQ_FUZZ_CHECK(st.packets_checked <= st.datagrams, "stream " + std::to_string(s) + " checked more packets than it received");
        PAQ_FUZZ_CHECK(st.duplicated <= st.datagrams, "stream " + std::to_string(s) + " has more duplicates than datagrams");
    }
    PAQ_FUZZ_CHECK(per_stream == monitor.datagrams_total(), "per-stream datagrams do not add up to the total");
    return 0;
}
