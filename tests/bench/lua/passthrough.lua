-- Pass-through load: one URL, sent in absolute form through a proxy (or in origin
-- form straight to the origin).
--   wrk -s passthrough.lua http://PROXY:PORT/ -- proxy  http://127.0.0.1:ORIGIN/1k 1024
--   wrk -s passthrough.lua http://127.0.0.1:ORIGIN/ -- direct http://127.0.0.1:ORIGIN/1k 1024
-- The request is built once (static), so wrk's per-request cost is the same for all.
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "common.lua")

function init(args)
   local mode, url = args[1], args[2]
   expect_len = tonumber(args[3] or "-1")
   local hostport, path = url:match("^http://([^/]+)(/.*)$")
   wrk.headers["Host"] = hostport
   if mode == "proxy" then
      wrk.path = url          -- absolute form: GET http://host:port/1k HTTP/1.1
   else
      wrk.path = path
   end
end
