"""placeholder"""
def merge_traces(traces):
    return traces
