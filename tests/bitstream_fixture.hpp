// Synthetic receiver output for the bitstream tests: batch_outputs whose packets carry one
// continuous PN sequence in their data fields (the same on all six paths), as a BER tester's
// transmitter would send it, with known start samples and estimates.
#pragma once

#include "dsp/batch.hpp"
#include "dsp/pn.hpp"
#include "dsp/waveform.hpp"
#include "io/bitstream.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace paq::test {

/// `batches` batches of `packets_per_batch` packets; packet k overall starts at
/// first_sample + k * L_pkt and holds bits [k * 6144, (k + 1) * 6144) of the pattern.
/// BEP estimates differ per path and packet so that header fields are checkable.
inline std::vector<dsp::batch_output> make_pn_batches(int batches, int packets_per_batch,
                                                      dsp::pn_pattern pattern = dsp::pn_pattern::pn15,
                                                      std::uint64_t first_sample = 1000)
{
    dsp::pn_generator gen(pattern);
    std::vector<dsp::batch_output> out;
    std::uint64_t k = 0;
    for (int b = 0; b < batches; ++b) {
        dsp::batch_output batch;
        batch.batch_index = static_cast<std::uint64_t>(b) + 7;
        batch.bits.assign(static_cast<std::size_t>(packets_per_batch) * dsp::chain::num_paths * dsp::packed_data_bytes, 0);
        for (int p = 0; p < packets_per_batch; ++p, ++k) {
            dsp::packet_record rec;
            rec.start_sample = first_sample + k * waveform::L_pkt;
            rec.cfo_rad_per_sample = 1e-3 * static_cast<double>(k);
            rec.ebn0_db = 10.0 + 0.25 * static_cast<double>(k);
            rec.flags = static_cast<std::uint32_t>(k % 32);
            std::vector<std::uint8_t> packed(dsp::packed_data_bytes, 0);
            for (std::size_t i = 0; i < waveform::data_bits; ++i) {
                packed[i / 8] = static_cast<std::uint8_t>(packed[i / 8] | (gen.next() << (7 - i % 8)));
            }
            for (int path = 0; path < dsp::chain::num_paths; ++path) {
                rec.paths[static_cast<std::size_t>(path)].bep_estimate =
                    1e-4f * static_cast<float>(path + 1) + 1e-6f * static_cast<float>(k);
                std::uint8_t* dst = batch.bits.data() +
                                    (static_cast<std::size_t>(p) * dsp::chain::num_paths + static_cast<std::size_t>(path)) *
                                        dsp::packed_data_bytes;
                std::copy(packed.begin(), packed.end(), dst);
            }
            batch.packets.push_back(rec);
        }
        out.push_back(std::move(batch));
    }
    return out;
}

/// Flips data bit `bit` (0 .. 6143, MSB first) of one packet of one path.
inline void flip_bit(dsp::batch_output& batch, std::size_t packet, int path, std::size_t bit)
{
    std::uint8_t* p = batch.bits.data() + (packet * dsp::chain::num_paths + static_cast<std::size_t>(path)) * dsp::packed_data_bytes;
    p[bit / 8] = static_cast<std::uint8_t>(p[bit / 8] ^ (0x80u >> (bit % 8)));
}

/// The datagram a publisher would send for packet `packet` of `batch` on `stream`.
inline std::vector<std::uint8_t> encode_packet(io::bitstream_format format, const dsp::batch_output& batch,
                                               std::size_t packet, int stream, std::uint64_t sequence,
                                               std::uint64_t packet_index, std::uint16_t dqe_id = 0)
{
    const dsp::packet_record& rec = batch.packets[packet];
    io::datagram_header h;
    h.stream_id = static_cast<std::uint8_t>(stream);
    h.sequence = sequence;
    h.packet_index = packet_index;
    h.batch_index = batch.batch_index;
    h.start_sample = rec.start_sample;
    h.flags = rec.flags;
    h.bep_estimate = rec.paths[static_cast<std::size_t>(stream)].bep_estimate;
    h.cfo_rad_per_sample = static_cast<float>(rec.cfo_rad_per_sample);
    h.ebn0_db = static_cast<float>(rec.ebn0_db);
    std::vector<std::uint8_t> out(io::datagram_bytes(format));
    io::encode_datagram(format, h, dqe_id, {batch.packet_bits(packet, stream), dsp::packed_data_bytes}, out);
    return out;
}

}  // namespace paq::test
