-- wrk script for kvrouter serve: POST /query with a random body from a file of JSON lines.
-- Usage: wrk -t1 -c16 -d30s --latency -s query.lua http://127.0.0.1:18090 -- bodies.jsonl
-- The requests are formatted once in init(), so that wrk spends its time sending, not in Lua.
local requests = {}

function init(args)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  for line in io.lines(args[1]) do
    requests[#requests + 1] = wrk.format("POST", "/query", nil, line)
  end
  if #requests == 0 then
    error("no request bodies in " .. tostring(args[1]))
  end
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
end

function request()
  return requests[math.random(#requests)]
end
