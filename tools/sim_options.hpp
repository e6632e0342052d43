// The command-line option of paq-sim and paq-ber-curve that sets each sim::sim_config field,
// so that a rejected value (sim_config::validate's messages start with the field) names the
// option the user typed.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace paq::tools {

/// "--OPTION: " for the field a sim_config::validate message starts with; empty if none.
inline std::string sim_option_of(const std::string& message)
{
    static const std::vector<std::pair<std::string, std::string>> fields{
        {"ebn0_db", "--ebn0-db"},
        {"cfo_hz", "--cfo-hz"},
        {"phase_rad", "--phase-rad"},
        {"timing_offset_samples", "--timing-offset"},
        {"bit_rate_hz", "--bit-rate"},
        {"sample_rate_hz", "--sample-rate"},
        {"clock_ppm", "--clock-ppm"},
        {"clock_drift_ppm_per_s", "--clock-drift-ppm-per-s"},
        {"gain_db", "--gain-db"},
        {"agc_steps", "--agc-step"},
        {"iq_gain_db", "--iq-imbalance (DB)"},
        {"iq_phase_deg", "--iq-imbalance (DEG)"},
        {"dc_offset_dbc", "--dc-offset"},
        {"phase_noise_linewidth_hz", "--phase-noise-linewidth"},
        {"phase_noise_curve", "--phase-noise"},
        {"phase_noise_above_hz", "--phase-noise-above"},
        {"flight_start_s", "--flight-start"},
        {"extra_rays", "--ray"},
        {"preset", "--preset"},
        {"delay_ns", "delay-ns"},
        {"shadow_depth_db", "shadow-db"},
        {"shadow_duration_s", "shadow-s"},
        {"shadow_interval_s", "shadow-every-s"},
    };
    for (const auto& [field, option] : fields)
        if (message.rfind(field, 0) == 0) return option + ": ";
    return {};
}

}  // namespace paq::tools
