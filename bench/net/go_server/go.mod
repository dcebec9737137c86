module usched.example/netbench/go_server

go 1.19
