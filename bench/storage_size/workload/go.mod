module profd/bench/workload

go 1.19
