// The one interface every signal-chain backend implements (CPU here, CUDA in gpu/).
//
//   Create (constructor: tables, plans, buffers)  ->  process(batch) ... process(batch)
//
// process() takes one batch window and returns every packet it owns, with the bits of all
// six paths. It is called from one thread at a time per instance.
#pragma once

#include "dsp/batch.hpp"

#include <memory>
#include <string>

namespace paq::dsp {

class batch_processor {
public:
    virtual ~batch_processor() = default;
    [[nodiscard]] virtual batch_output process(const sample_batch& batch) = 0;
    [[nodiscard]] virtual std::string name() const = 0;
};

}  // namespace paq::dsp
