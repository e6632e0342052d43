// SigMF metadata: the bytes of a .sigmf-meta file through io::read_sigmf_meta.
//
// Checked, besides the sanitizers: the reader throws nothing but io::format_error (what the
// callers catch); metadata it accepts survives to_sigmf_json and reads back the same.
#include "io/sigmf.hpp"
#include "tests/fuzz/fuzz_support.hpp"

#include <cmath>

using namespace paq;

namespace {
paq::fuzz::scratch_dir& scratch()
{
    static paq::fuzz::scratch_dir dir;
    return dir;
}

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const auto path = scratch().write("input.sigmf-meta", {data, size});
    io::sigmf_meta meta;
    try {
        meta = io::read_sigmf_meta(path);
    } catch (const io::format_error&) {
        return 0;  // rejected with a message naming the file: what the callers expect
    }
    // Accepted metadata must be writable and read back unchanged. Header bytes describe a
    // data file's layout, which paqd never writes: the writer takes none.
    meta.header_chunks.clear();
    std::string text;
    try {
        text = io::to_sigmf_json(meta);
    } catch (const std::invalid_argument& e) {
        // A foreign file may carry what paqd would not write: keys not 'namespace:name', a
        // namespace it does not declare, annotations out of order or without a start. The
        // reader keeps them as they are, the writer refuses to produce them (what
        // paqd writes is SigMF). Anything else is a defect.
        const std::string_view what = e.what();
        for (const std::string_view expected : {"must be namespaced", "is used but not declared", "SigMF annotations"}) {
            if (what.find(expected) != std::string_view::npos) return 0;
        }
        PAQ_FUZZ_CHECK(false, std::string("accepted metadata cannot be written back: ") + e.what());
    }
    const auto again_path = scratch().write("again.sigmf-meta", {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
    io::sigmf_meta again;
    try {
        again = io::read_sigmf_meta(again_path);
    } catch (const io::format_error& e) {
        PAQ_FUZZ_CHECK(false, std::string("written-back metadata is rejected: ") + e.what());
    }
    PAQ_FUZZ_CHECK(again.format == meta.format, "core:datatype changed on the round trip");
    PAQ_FUZZ_CHECK(same(again.sample_rate_hz, meta.sample_rate_hz), "core:sample_rate changed on the round trip");
    PAQ_FUZZ_CHECK(again.description == meta.description, "core:description changed on the round trip");
    PAQ_FUZZ_CHECK(again.recorder == meta.recorder, "core:recorder changed on the round trip");
    PAQ_FUZZ_CHECK(again.ci16_scale == meta.ci16_scale, "paq:ci16_scale changed on the round trip");
    PAQ_FUZZ_CHECK(same(again.center_frequency_hz, meta.center_frequency_hz), "core:frequency changed on the round trip");
    PAQ_FUZZ_CHECK(again.datetime_iso8601 == meta.datetime_iso8601, "core:datetime changed on the round trip");
    PAQ_FUZZ_CHECK(again.extra_global == meta.extra_global, "extra global keys changed on the round trip");
    PAQ_FUZZ_CHECK(again.extensions == meta.extensions, "core:extensions changed on the round trip");
    PAQ_FUZZ_CHECK(again.annotations == meta.annotations, "annotations changed on the round trip");
    return 0;
}
