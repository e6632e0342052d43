// The CPU reference backend: the whole chain in double precision, packets in parallel on all
// cores (OpenMP). Simple and obviously right; the GPU backend is tested against it.
#pragma once

#include "dsp/backend.hpp"
#include "dsp/receiver_config.hpp"

#include <memory>

namespace paq::dsp {

class cpu_backend final : public batch_processor {
public:
    /// Throws std::invalid_argument if cfg does not validate.
    explicit cpu_backend(const receiver_config& cfg);
    ~cpu_backend() override;

    using batch_processor::process;
    void process(const sample_batch& batch, batch_output& out) override;
    [[nodiscard]] std::string name() const override { return "cpu"; }
    void set_soft_output(bool on) override;

    /// One packet whose start is at window index `start` (may be near the window's edges:
    /// samples outside are read as zero). bits_out: the packet's streams, receiver_config::streams()
    /// x 768 bytes. Used by process() and by the tests.
    void process_packet(const cf32* window, std::size_t window_len, long long start, packet_record& rec,
                        std::uint8_t* bits_out);

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace paq::dsp
