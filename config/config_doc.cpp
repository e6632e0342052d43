// paq-config-doc: the configuration key tables of docs/DAEMON.md, from the schema
// (config/schema.hpp). Not installed; a ctest keeps the document in step with the code.
//   paq-config-doc                         print every section's table
//   paq-config-doc --check docs/DAEMON.md  exit 1 when the marked tables differ
//   paq-config-doc --update docs/DAEMON.md rewrite the marked tables
//   paq-config-doc --man paqd.yaml.5       write the configuration file's man page
#include "config/cli.hpp"
#include "config/schema.hpp"

#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>

int main(int argc, char** argv)
{
    using namespace paq;
    CLI::App app{"paq-config-doc: the configuration key tables of docs/DAEMON.md, generated from the schema"};
    cli::conventions(app, "paq-config-doc", "0 tables printed, in step or updated; 1 the document's tables differ (--check) "
                                            "or it cannot be read or written; 2 usage error");
    std::string check_file, update_file, man_file;
    app.add_option("--check", check_file, "Compare the tables between <!-- schema:begin SECTION --> and "
                                          "<!-- schema:end --> in this Markdown file with the schema");
    app.add_option("--update", update_file, "Rewrite those tables in this Markdown file");
    app.add_option("--man", man_file, "Write the configuration file's man page, paqd.yaml(5), to this file");
    if (const int rc = cli::parse(app, argc, argv); rc >= 0) return rc;

    if (!man_file.empty()) {
        std::ofstream out(man_file, std::ios::binary | std::ios::trunc);
        out << config::schema_man_page(PAQ_VERSION);
        if (!out.flush()) {
            std::cerr << "paq-config-doc: cannot write " << man_file << "\n";
            return 1;
        }
        return 0;
    }

    if (check_file.empty() && update_file.empty()) {
        for (const auto& section : config::schema_sections()) {
            std::cout << "<!-- schema:begin " << section << " -->\n" << config::schema_markdown(section)
                      << "<!-- schema:end -->\n\n";
        }
        return 0;
    }
    const std::string file = check_file.empty() ? update_file : check_file;
    try {
        std::ifstream in(file, std::ios::binary);
        if (!in) throw std::runtime_error("cannot read " + file);
        std::ostringstream text;
        text << in.rdbuf();
        const std::string current = text.str();
        const std::string generated = config::update_schema_markdown(current);
        if (generated == current) return 0;
        if (!check_file.empty()) {
            std::istringstream a(current), b(generated);
            std::string la, lb;
            int line = 0;
            while (true) {
                const bool ga = static_cast<bool>(std::getline(a, la)), gb = static_cast<bool>(std::getline(b, lb));
                ++line;
                if (!ga || !gb || la != lb) break;
            }
            std::cerr << file << ":" << line << ": the configuration key tables differ from the schema\n"
                      << "  document:  " << la << "\n  generated: " << lb << "\n"
                      << "run paq-config-doc --update " << file << " (config/*_yaml.cpp hold the schema)\n";
            return 1;
        }
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        out << generated;
        if (!out) throw std::runtime_error("cannot write " + file);
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "paq-config-doc: " << e.what() << "\n";
        return 1;
    }
}
