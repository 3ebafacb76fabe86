-- Many host names through a proxy that resolves "*.bench.test" itself.
--   wrk -s hosts.lua http://PROXY:PORT/ -- MODE ORIGIN_PORT PATH NHOSTS NTHREADS EXPECT_LEN [PREFIX]
-- MODE rotate: every request goes to the next host of PREFIX0 .. PREFIX{NHOSTS-1}
--   (round robin; each thread starts at its own offset), so every host gets the same
--   share of the load and, with several connections per host, its queue stays full.
-- MODE once: thread t sends one request to each host t, t+NTHREADS, ... and stops once
--   its share has been answered; the few requests its other connections send after
--   that reuse hosts already seen, so exactly NHOSTS distinct hosts are used. wrk's main
--   thread sleeps for -d anyway: run_bench.py interrupts it (SIGINT) when the proxy
--   tracks every host.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "common.lua")

local function req_for(h)
   local hp = prefix .. h .. ".bench.test:" .. port
   return wrk.format("GET", "http://" .. hp .. path, { Host = hp })
end

function init(args)
   mode, port, path = args[1], args[2], args[3]
   nhosts, nthreads = tonumber(args[4]), tonumber(args[5])
   expect_len = tonumber(args[6] or "-1")
   prefix = args[7] or "h"
   if mode == "rotate" then
      reqs = {}
      for h = 0, nhosts - 1 do reqs[h] = req_for(h) end
      i = math.floor(tid * nhosts / nthreads)
   else
      next_host = tid
      quota = math.floor((nhosts - 1 - tid) / nthreads) + 1
      if tid >= nhosts then quota = 0 end
   end
end

function request()
   if mode == "rotate" then
      local r = reqs[i % nhosts]
      i = i + 1
      return r
   end
   local h = next_host
   next_host = next_host + nthreads
   if next_host >= nhosts then next_host = tid end
   return req_for(h)
end

function response(status, headers, body)
   check_response(status, headers, body)
   if mode == "once" and ok + bad >= quota then
      wrk.thread:stop()
   end
end
