-- Shared by the politeproxy benchmark's wrk scripts (loaded with dofile by each).
--
-- Every response is checked: status 200, the origin's X-Bench-Origin header present
-- (a response a proxy made up itself has none) and, when known, the body length.
-- done() prints one line "BENCH_JSON {...}" that run_bench.py parses, and exits
-- non-zero when any response failed the check, so a run with a bad response fails.

local threads = {}

function setup(thread)
   thread:set("tid", #threads)
   table.insert(threads, thread)
end

-- globals of each thread's environment (read back through thread:get in done)
ok, bad, first_bad = 0, 0, ""
expect_len = -1

function check_response(status, headers, body)
   local origin = headers["X-Bench-Origin"] or headers["x-bench-origin"]
   if status == 200 and origin ~= nil and (expect_len < 0 or #body == expect_len) then
      ok = ok + 1
      return true
   end
   bad = bad + 1
   if first_bad == "" then
      first_bad = "status=" .. status .. " origin_header=" .. tostring(origin) ..
                  " body_len=" .. #body .. " body=" .. string.sub(body, 1, 120):gsub("[%c\"\\]", " ")
   end
   return false
end

function response(status, headers, body)
   check_response(status, headers, body)
end

function done(summary, latency, requests)
   local total_ok, total_bad, why = 0, 0, ""
   for _, t in ipairs(threads) do
      total_ok = total_ok + (t:get("ok") or 0)
      total_bad = total_bad + (t:get("bad") or 0)
      local fb = t:get("first_bad")
      if why == "" and fb ~= nil and fb ~= "" then why = fb end
   end
   local e = summary.errors
   io.write(string.format(
      'BENCH_JSON {"requests": %d, "duration_us": %d, "bytes": %d, "ok": %d, "bad": %d, ' ..
      '"p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d, "mean_us": %.1f, ' ..
      '"err_connect": %d, "err_read": %d, "err_write": %d, "err_status": %d, "err_timeout": %d, ' ..
      '"first_bad": "%s"}\n',
      summary.requests, summary.duration, summary.bytes, total_ok, total_bad,
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean,
      e.connect, e.read, e.write, e.status, e.timeout, why))
   io.flush()
   if total_bad > 0 or total_ok ~= summary.requests then
      os.exit(3)
   end
end
