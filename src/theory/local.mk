# theory stage (owned by the theory work)
