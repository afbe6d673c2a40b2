# ran-config/: the ZMQ broker between one srsenb and N srsue (the srsran-zmq lab with several UEs).
$(BIN)/cellab-zmq-broker: ran-config/broker/zmq_broker.c ran-config/rules.mk
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS_COMMON) -o $@ ran-config/broker/zmq_broker.c $$(pkg-config --cflags --libs libzmq) -lpthread -lm

BUILD_TARGETS += $(BIN)/cellab-zmq-broker
