// The reference point for the peeker: simdjson On-Demand doing the same job
// as bench_peek on the same file. For every record it finds event_type,
// detail.tenant_id (or truck.tenant_id) and timestamp, and the record's raw
// byte span, then folds them into a checksum so nothing is optimised away.
// It builds no key; bench_peek also builds each record's destination key.
//
//   simdjson_peek FILE [runs] [framing-label]
//
// Prints the median throughput of `runs` passes over the file, held in
// memory (one core).
#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

using namespace simdjson;

static uint64_t fold(uint64_t h, std::string_view s)
{
    for (char c : s)
        h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
    return h;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        std::fprintf(stderr, "usage: simdjson_peek FILE [runs] [label]\n");
        return 2;
    }
    int runs = argc > 2 ? std::atoi(argv[2]) : 5;
    const char *label = argc > 3 ? argv[3] : "";
    padded_string json;
    if (padded_string::load(argv[1]).get(json)) {
        std::fprintf(stderr, "simdjson_peek: cannot read %s\n", argv[1]);
        return 1;
    }
    ondemand::parser parser;
    std::vector<double> mbps;
    uint64_t check = 0;
    size_t records = 0;
    for (int run = 0; run < runs; run++) {
        auto t0 = std::chrono::steady_clock::now();
        ondemand::document_stream stream;
        if (parser.iterate_many(json, 1 << 20).get(stream)) {
            std::fprintf(stderr, "simdjson_peek: iterate_many failed\n");
            return 1;
        }
        size_t n = 0;
        // A record's span runs from its first byte to the next record's,
        // less the whitespace between. (document_stream's source() would
        // give it directly but costs time proportional to the batch.)
        size_t prev = SIZE_MAX;
        auto span = [&](size_t from, size_t to) {
            while (to > from && std::isspace(static_cast<unsigned char>(
                                    json.data()[to - 1])))
                to--;
            return std::string_view(json.data() + from, to - from);
        };
        for (auto it = stream.begin(); it != stream.end(); ++it) {
            size_t start = it.current_index();
            if (prev != SIZE_MAX)
                check += span(prev, start).size();
            prev = start;
            auto doc = *it;
            std::string_view type, tenant, ts;
            if (doc["event_type"].get_string().get(type))
                type = {};
            if (doc["detail"]["tenant_id"].get_string().get(tenant) &&
                doc["truck"]["tenant_id"].get_string().get(tenant))
                tenant = {};
            if (doc["timestamp"].raw_json_token().get(ts))
                ts = {};
            check = fold(check, type);
            check = fold(check, tenant);
            check = fold(check, ts);
            n++;
        }
        if (prev != SIZE_MAX)
            check += span(prev, json.size()).size();
        double secs = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
        mbps.push_back(static_cast<double>(json.size()) / 1e6 / secs);
        records = n;
    }
    std::sort(mbps.begin(), mbps.end());
    std::printf("simdjson On-Demand %-6s one core: %.0f MB/s median of %d "
                "runs (%.1f MB, %zu records) [%llx]\n",
                label, mbps[mbps.size() / 2], runs,
                static_cast<double>(json.size()) / 1e6, records,
                static_cast<unsigned long long>(check & 0xff));
    return 0;
}
